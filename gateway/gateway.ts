/**
 * The gateway process: leases accounts through heartbeats, runs one AccountSync per leased
 * account and answers the Worker's requests on the control socket. Each heartbeat keeps its leases
 * and says which accounts to take (its share of the fleet's lacks them) or hand over (its surplus);
 * a stopping gateway gives all its leases up at once for the others to take.
 */
import type { GatewayRequest } from '../common/relay.ts';
import { AccountSync } from './account-sync.ts';
import { GatewayError } from './errors.ts';
import type { MailboxCommands } from './mailbox.ts';
import { OutgoingSends } from './sends.ts';
import { Pacer } from './pacer.ts';
import { backoffDelay, sleep } from './async.ts';
import type { GatewayConfig } from './config.ts';
import { errorFields, type Logger } from './log.ts';
import { countFailure, type GatewayState } from './metrics.ts';
import { GATEWAY_VERSION } from './version.ts';
import { verifyMailbox } from './verify.ts';
import { Aborted, isGatewayIdInUse, isLeaseLost, WorkerClient } from './worker-client.ts';

/** Heartbeat period before the Worker told us the lease TTL. */
const INITIAL_HEARTBEAT_MS = 10_000;
/** How long a stopping gateway waits for its accounts to close, then for its leases to be released. */
const RELEASE_ON_STOP_MS = 3_000;

export class Gateway {
  #config: GatewayConfig;
  #log: Logger;
  #worker: WorkerClient;
  #accounts = new Map<string, AccountSync>();
  /** Command connections (send, modify) of the accounts held, beside their syncs. */
  #commands = new Map<string, MailboxCommands>();
  #leasing = new Map<string, Promise<void>>();
  #sends: OutgoingSends;
  /** Background work (polls, heartbeats) behind new mail, polls spread over their interval. */
  #pacer: Pacer;
  #abort = new AbortController();
  #tasks: Promise<void>[] = [];
  /** Ends the heartbeat loop's wait: the Worker asked for a heartbeat now (`rebalance`). */
  #wake = new AbortController();
  /** The last heartbeat's fate, for /healthz and /metrics. */
  #heartbeat = { answeredAt: null as number | null, reachable: false, leaseTtlMs: 3 * INITIAL_HEARTBEAT_MS };

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
    this.#pacer = new Pacer(config.sync.pollIntervalMs);
  }

  start(): void {
    const { sync } = this.#config;
    this.#log.info('gateway starting', { worker: this.#config.workerUrl.origin, capacity: this.#config.capacity });
    this.#tasks.push(
      this.#heartbeatLoop(),
      this.#worker.runControlSocket((request) => this.handle(request), this.#abort.signal, {
        minMs: sync.reconnectMinMs,
        maxMs: sync.reconnectMaxMs,
      }),
    );
  }

  /** What /healthz and /metrics report. */
  state(): GatewayState {
    return {
      gatewayId: this.#config.gatewayId,
      version: GATEWAY_VERSION,
      accounts: this.#accounts.size,
      lastHeartbeatAt: this.#heartbeat.answeredAt,
      workerReachable: this.#heartbeat.reachable,
      leaseTtlMs: this.#heartbeat.leaseTtlMs,
    };
  }

  /**
   * Closes every account's connections and ends the loops, then gives the leases up so that the
   * other gateways take the accounts at once instead of waiting for the leases to lapse.
   */
  async stop(): Promise<void> {
    this.#abort.abort();
    const held = [...this.#accounts.keys()];
    for (const commands of this.#commands.values()) commands.close();
    this.#commands.clear();
    // Changes still on their way land before the leases go, or are refused once another gateway
    // holds the account: either way nothing is applied twice. So a slow close does not hold the release up.
    const stopped = Promise.all([...this.#accounts.values()].map((account) => account.stop()));
    await Promise.race([stopped, sleep(RELEASE_ON_STOP_MS)]);
    this.#accounts.clear();
    try {
      await this.#worker.release(held, true, { signal: AbortSignal.timeout(RELEASE_ON_STOP_MS), attempts: 3 });
      this.#log.info('leases released', { accounts: held.length });
    } catch (err) {
      this.#log.warn('could not release the leases: they lapse after the lease time', errorFields(err));
    }
    await Promise.allSettled([stopped, ...this.#tasks]);
  }

  /** A request from the Worker (control socket). Throws GatewayError for the Worker to relay. */
  async handle(request: GatewayRequest): Promise<unknown> {
    switch (request.op) {
      case 'verify':
        return verifyMailbox(request.config, this.#config.sync.connectTimeoutMs);
      case 'claim':
        // Also when we hold it already: a reconnect brings new settings. When full, the others take it.
        if (this.#accounts.has(request.account_id) || this.#hasRoom()) await this.#lease(request.account_id);
        return { held: this.#accounts.has(request.account_id) };
      case 'rebalance':
        this.#wake.abort();
        return { ok: true };
      case 'release':
        await this.#release(request.account_id, 'released by the worker');
        return { held: false };
      case 'send':
        return this.#sends.run(request, () => this.#commandsFor(request.account_id));
      case 'modify':
        return this.#commandsFor(request.account_id).modify(request.steps);
      case 'folder':
        return this.#commandsFor(request.account_id).folder(request.action);
    }
  }

  #commandsFor(accountId: string): MailboxCommands {
    const commands = this.#commands.get(accountId);
    if (!commands) throw new GatewayError('provider_error', 'this gateway does not hold the account (its lease moved)');
    return commands;
  }

  /** Room for one more account under GATEWAY_CAPACITY (leases under way count). */
  #hasRoom(): boolean {
    return this.#accounts.size + this.#leasing.size < this.#config.capacity;
  }

  async #heartbeatLoop(): Promise<void> {
    const signal = this.#abort.signal;
    let interval = INITIAL_HEARTBEAT_MS;
    let refusals = 0;
    while (!signal.aborted) {
      let wait = interval;
      // A `rebalance` from now on (even during this heartbeat) cuts the next wait short.
      this.#wake = new AbortController();
      try {
        // Not while new mail is on its way to the Worker (at most a second later: leases last minutes).
        await this.#pacer.quiet();
        const held = [...this.#accounts.keys()];
        const res = await this.#worker.heartbeat(held, this.#config.capacity, { signal, attempts: 4 });
        refusals = 0;
        this.#heartbeat = { answeredAt: Date.now(), reachable: true, leaseTtlMs: res.lease_ttl_ms };
        interval = Math.max(1_000, Math.floor(res.lease_ttl_ms / 3));
        wait = interval;
        await Promise.all(res.lost.map((id) => this.#release(id, 'lease lost')));
        if (res.release.length) void this.#handOver(res.release);
        for (const id of res.claimable) if (!this.#accounts.has(id) && this.#hasRoom()) void this.#lease(id);
      } catch (err) {
        if (err instanceof Aborted) break;
        this.#heartbeat.reachable = isGatewayIdInUse(err);
        countFailure(err);
        if (isGatewayIdInUse(err)) {
          // Never fight the owner of the id: hold nothing, and try again until it is gone.
          wait = backoffDelay(refusals++, INITIAL_HEARTBEAT_MS, 60_000);
          this.#log.error('another live gateway uses this GATEWAY_ID: this one holds no account until it stops', {
            retry_in_ms: wait,
          });
          await Promise.all([...this.#accounts.keys()].map((id) => this.#release(id, 'gateway id in use')));
        } else this.#log.warn('heartbeat failed', errorFields(err));
      }
      await sleep(wait, AbortSignal.any([signal, this.#wake.signal]));
    }
  }

  /** Hands accounts beyond our share over: stops them, then releases their leases for others to take. */
  async #handOver(ids: string[]): Promise<void> {
    const mine = ids.filter((id) => this.#accounts.has(id));
    await Promise.all(mine.map((id) => this.#release(id, 'handed over to another gateway')));
    // Until the Worker has them back they stay ours in D1 (a lease lasts while its gateway
    // heartbeats) and nobody syncs them: ask again until it answers, or this process stops.
    const signal = this.#abort.signal;
    for (let attempt = 0; !signal.aborted; attempt++) {
      try {
        await this.#worker.release(mine, false, { signal, attempts: 4 });
        return;
      } catch (err) {
        if (err instanceof Aborted) return;
        const wait = backoffDelay(attempt, INITIAL_HEARTBEAT_MS, 60_000);
        this.#log.warn('hand-over failed, trying again', { ...errorFields(err), retry_in_ms: wait });
        await sleep(wait, signal);
      }
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
          pacer: this.#pacer,
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
