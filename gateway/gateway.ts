/**
 * The gateway process: leases accounts through heartbeats, runs one AccountSync per leased
 * account and answers the Worker's requests on the control socket.
 */
import type { GatewayRequest } from '../common/relay.ts';
import { AccountSync } from './account-sync.ts';
import { GatewayError } from './errors.ts';
import type { MailboxCommands } from './mailbox.ts';
import { OutgoingSends } from './sends.ts';
import { sleep } from './async.ts';
import type { GatewayConfig } from './config.ts';
import { errorFields, type Logger } from './log.ts';
import { verifyMailbox } from './verify.ts';
import { Aborted, isLeaseLost, WorkerClient } from './worker-client.ts';

/** Heartbeat period before the Worker told us the lease TTL. */
const INITIAL_HEARTBEAT_MS = 10_000;

export class Gateway {
  #config: GatewayConfig;
  #log: Logger;
  #worker: WorkerClient;
  #accounts = new Map<string, AccountSync>();
  /** Command connections (send, modify) of the accounts held, beside their syncs. */
  #commands = new Map<string, MailboxCommands>();
  #leasing = new Map<string, Promise<void>>();
  #sends: OutgoingSends;
  #abort = new AbortController();
  #tasks: Promise<void>[] = [];

  constructor(config: GatewayConfig, log: Logger) {
    this.#config = config;
    this.#log = log;
    this.#worker = new WorkerClient({
      workerUrl: config.workerUrl,
      secret: config.secret,
      gatewayId: config.gatewayId,
      log,
    });
    this.#sends = new OutgoingSends(this.#worker, log);
  }

  start(): void {
    const { sync } = this.#config;
    this.#log.info('gateway starting', { worker: this.#config.workerUrl.origin });
    this.#tasks.push(
      this.#heartbeatLoop(),
      this.#worker.runControlSocket((request) => this.handle(request), this.#abort.signal, {
        minMs: sync.reconnectMinMs,
        maxMs: sync.reconnectMaxMs,
      }),
    );
  }

  /** Closes every account's connections and ends the loops. */
  async stop(): Promise<void> {
    this.#abort.abort();
    for (const commands of this.#commands.values()) commands.close();
    this.#commands.clear();
    await Promise.all([...this.#accounts.values()].map((account) => account.stop()));
    this.#accounts.clear();
    await Promise.allSettled(this.#tasks);
  }

  /** A request from the Worker (control socket). Throws GatewayError for the Worker to relay. */
  async handle(request: GatewayRequest): Promise<unknown> {
    switch (request.op) {
      case 'verify':
        return verifyMailbox(request.config, this.#config.sync.connectTimeoutMs);
      case 'claim':
        // Also when we hold it already: a reconnect brings new settings.
        await this.#lease(request.account_id);
        return { held: this.#accounts.has(request.account_id) };
      case 'release':
        await this.#release(request.account_id, 'released by the worker');
        return { held: false };
      case 'send':
        return this.#sends.run(request, () => this.#commandsFor(request.account_id));
      case 'modify':
        return this.#commandsFor(request.account_id).modify(request.steps);
    }
  }

  #commandsFor(accountId: string): MailboxCommands {
    const commands = this.#commands.get(accountId);
    if (!commands) throw new GatewayError('provider_error', 'this gateway does not hold the account (its lease moved)');
    return commands;
  }

  async #heartbeatLoop(): Promise<void> {
    const signal = this.#abort.signal;
    let interval = INITIAL_HEARTBEAT_MS;
    while (!signal.aborted) {
      try {
        const res = await this.#worker.heartbeat([...this.#accounts.keys()], { signal, attempts: 4 });
        interval = Math.max(1_000, Math.floor(res.lease_ttl_ms / 3));
        await Promise.all(res.lost.map((id) => this.#release(id, 'lease lost')));
        for (const id of res.claimable) if (!this.#accounts.has(id)) void this.#lease(id);
      } catch (err) {
        if (err instanceof Aborted) break;
        this.#log.warn('heartbeat failed', errorFields(err));
      }
      await sleep(interval, signal);
    }
  }

  /** Leases an account and (re)starts its sync with the settings and cursors the Worker returns. */
  #lease(id: string): Promise<void> {
    const pending = this.#leasing.get(id);
    if (pending) return pending;
    const attempt = (async () => {
      try {
        const res = await this.#worker.lease(id, { signal: this.#abort.signal, attempts: 4 });
        if (!res.granted) {
          this.#log.info('lease refused', { account: id, holder: res.holder });
          return;
        }
        await this.#accounts.get(id)?.stop();
        this.#commands.get(id)?.close();
        if (this.#abort.signal.aborted) return;
        const account = new AccountSync(id, res, {
          worker: this.#worker,
          settings: this.#config.sync,
          log: this.#log,
          onLeaseLost: (lost) => {
            if (this.#accounts.get(lost) === account) this.#accounts.delete(lost);
            if (this.#commands.get(lost) === commands) this.#commands.delete(lost);
            commands.close();
          },
        });
        const commands = account.commands;
        this.#accounts.set(id, account);
        this.#commands.set(id, commands);
        this.#log.info('lease granted', { account: id, cursors: res.cursors.length });
        account.start();
      } catch (err) {
        if (!(err instanceof Aborted) && !isLeaseLost(err))
          this.#log.warn('lease failed', { account: id, ...errorFields(err) });
      } finally {
        this.#leasing.delete(id);
      }
    })();
    this.#leasing.set(id, attempt);
    return attempt;
  }

  async #release(id: string, reason: string): Promise<void> {
    this.#commands.get(id)?.close();
    this.#commands.delete(id);
    const account = this.#accounts.get(id);
    if (!account) return;
    this.#accounts.delete(id);
    this.#log.info('stopping account', { account: id, reason });
    await account.stop();
  }
}
