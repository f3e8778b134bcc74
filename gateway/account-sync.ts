/**
 * One leased account: runs sessions (gateway/session.ts) one after another, with backoff, and
 * reports the account's status. The connection model of a session is described there; mailbox
 * commands (gateway/mailbox.ts) use the running session's command connection.
 */
import type { AccountStatus, FolderCursor, MailboxConfig } from '../common/relay.ts';
import type { AccountDeps, AccountLease, PendingInitialSync } from './account-deps.ts';
import { backoffDelay, sleep } from './async.ts';
import type { CommandConnection } from './command-connection.ts';
import { classifyError, isAuthFailure } from './errors.ts';
import { Evidence } from './evidence.ts';
import { errorFields, type Logger } from './log.ts';
import { MailboxCommands } from './mailbox.ts';
import { countFailure } from './metrics.ts';
import { Session } from './session.ts';
import { Aborted, isLeaseLost, WorkerHttpError } from './worker-client.ts';

export type { AccountDeps, AccountLease } from './account-deps.ts';

export class AccountSync {
  readonly id: string;
  #config: MailboxConfig;
  #deps: AccountDeps;
  #log: Logger;
  #cursors = new Map<string, FolderCursor>();
  #initialSync: PendingInitialSync;
  #evidence: Evidence;
  #abort = new AbortController();
  #session: Session | null = null;
  #reported: AccountStatus | null = null;
  #done: Promise<void> = Promise.resolve();
  /** Sends and mailbox actions, on the running session's command connection. */
  readonly commands: MailboxCommands;

  constructor(id: string, lease: AccountLease, deps: AccountDeps) {
    this.id = id;
    this.#config = lease.config;
    this.#deps = deps;
    this.#log = deps.log.child({ account: id });
    for (const cursor of lease.cursors) this.#cursors.set(cursor.path, cursor);
    this.#initialSync = { plan: lease.initial_sync ?? null };
    this.#evidence = new Evidence(lease.orphans);
    this.commands = new MailboxCommands(lease.config, deps.settings, this.#log, {
      commandConnection: (): CommandConnection | null => this.#session?.command ?? null,
      changed: (paths) => {
        for (const path of paths) void this.#session?.wake(path);
      },
    });
  }

  start(): void {
    this.#done = this.#run();
  }

  /** Closes every connection at once; resolves when the account's loop has ended. */
  async stop(): Promise<void> {
    this.#abort.abort();
    this.commands.close();
    this.#session?.close();
    await this.#done;
  }

  async #run(): Promise<void> {
    const { settings } = this.#deps;
    const signal = this.#abort.signal;
    // The backoff starts over only after a session that stayed up this long: one that dies right
    // after it starts (a server that lets us in, then drops us) is retried ever more slowly.
    const HEALTHY_SESSION_MS = 60_000;
    for (let attempt = 0; !signal.aborted; ) {
      const session = new Session(
        this.id,
        this.#config,
        this.#cursors,
        this.#initialSync,
        this.#evidence,
        this.#deps,
        this.#log,
        signal,
      );
      this.#session = session;
      let failure: unknown;
      let startedAt: number | null = null;
      try {
        await Promise.race([session.start(), session.failed]);
        startedAt = Date.now();
        await this.#report('running', null);
        await session.failed;
      } catch (err) {
        failure = err;
      } finally {
        session.close();
        // A batch of the ended session still on its way must land before the next session's first
        // one, or its older view (flags, expunges) would overwrite the newer one.
        await session.settled();
        this.#session = null;
      }
      if (startedAt !== null && Date.now() - startedAt >= HEALTHY_SESSION_MS) attempt = 0;
      if (signal.aborted || failure instanceof Aborted) break;
      if (isLeaseLost(failure)) {
        this.#log.warn('lease lost, stopping');
        this.#abort.abort();
        this.commands.close();
        this.#deps.onLeaseLost(this.id);
        break;
      }
      let delay: number;
      if (isAuthFailure(failure)) {
        delay = settings.authRetryMs;
        await this.#report(
          'errored',
          classifyError(failure, 'IMAP', this.#config.imap.host, this.#config.imap.port).message,
        );
      } else if (failure instanceof WorkerHttpError) {
        // The Worker refused a batch (a 4xx other than lease loss): not the mailbox's fault.
        delay = backoffDelay(attempt++, settings.reconnectMinMs, settings.reconnectMaxMs);
      } else {
        delay = backoffDelay(attempt++, settings.reconnectMinMs, settings.reconnectMaxMs);
        // A running session that ends (the server closed one connection: Dovecot does when a folder
        // it had selected is deleted) is tried again once before anyone is told: a reconnect that
        // works is no disconnection. A second failure in a row is reported.
        if (attempt > 1 || this.#reported !== 'running')
          await this.#report(
            'disconnected',
            classifyError(failure, 'IMAP', this.#config.imap.host, this.#config.imap.port).message,
          );
      }
      countFailure(failure);
      this.#log.warn('session ended', { ...errorFields(failure), retry_in_ms: delay });
      await sleep(delay, signal);
    }
  }

  /** Reports a status only when it differs from the last one reported. */
  async #report(status: AccountStatus, error: string | null): Promise<void> {
    if (this.#reported === status) return;
    this.#log.info('status', { status, error });
    try {
      await this.#deps.worker.status(this.id, status, error, { signal: this.#abort.signal });
      this.#reported = status;
    } catch (err) {
      if (isLeaseLost(err)) {
        this.#abort.abort();
        this.#session?.close();
        this.#deps.onLeaseLost(this.id);
      } else if (!(err instanceof Aborted)) {
        this.#log.warn('status report failed', errorFields(err));
      }
    }
  }
}
