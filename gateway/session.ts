/**
 * One connected period of an account (see gateway/account-sync.ts for the retry loop around it).
 *
 * Its IMAP connections (docs/sync.md):
 *  - the primary connection: IDLE on INBOX (Gmail: All Mail), and the folder list with STATUS
 *    (at the start, at each poll of gateway/poll.ts; imapflow leaves IDLE for the command and goes
 *    back to it); plus one IDLE connection per extra watched folder when the operator asks for them
 *    (GATEWAY_MAX_EXTRA_IDLE). Passes over a watched folder run on its own connection, and IDLE is
 *    re-entered as soon as a pass releases the mailbox lock;
 *  - the command connection (gateway/command-connection.ts), opened when needed and closed after
 *    `commandIdleMs` without use: the passes over the other folders, the mailbox commands and the
 *    initial sync, in turn. An idle account on a server with CONDSTORE holds only the primary one.
 * Any connection dropped other than by that idle close ends the session.
 *
 * Nothing is kept durably. The cursors in memory are the Worker's (lease response, then each
 * changes response); a cursor change is only sent after everything it covers, in the same or an
 * earlier acknowledged call.
 */
import type { ImapFlow, ImapFlowOptions } from 'imapflow';
import type { Change, FolderCursor, FolderInfo, MailboxConfig } from '../common/relay.ts';
import { deferred } from './async.ts';
import { CommandConnection } from './command-connection.ts';
import { FolderChanges } from './folder-changes.ts';
import { FolderPasses, type PassHost } from './folder-pass.ts';
import { featuresOf, imapOptions, isSelectable, listFolders, openImap, type ServerFeatures } from './imap.ts';
import type { Logger } from './log.ts';
import type { StageSource } from './messages.ts';
import { FolderListing, Poller } from './poll.ts';
import type { AccountDeps, PendingInitialSync } from './account-deps.ts';
import type { Evidence } from './evidence.ts';
import { pullInitialSync } from './initial-sync.ts';
import { alsoWake, chooseWatched } from './watchers.ts';
import { nextStamp } from './stamps.ts';
import { Aborted, newChangeStream } from './worker-client.ts';

/** Re-issue IDLE this often (servers may drop an IDLE older than 30 minutes, RFC 2177). */
const IDLE_RESTART_MS = 20 * 60_000;
/** Socket inactivity before imapflow probes with NOOP: how fast a silently dead server is noticed. */
const SOCKET_TIMEOUT_MS = 90_000;
/** IDLE connections: IDLE as soon as no command runs. */
const WATCHER_OPTIONS: Partial<ImapFlowOptions> = { autoIdleDelay: 0, maxIdleTime: IDLE_RESTART_MS };

export class Session implements PassHost {
  readonly log: Logger;
  readonly cursors: Map<string, FolderCursor>;
  readonly changes: FolderChanges;
  /** Large sources go to the Worker ahead of their change. */
  readonly stage: StageSource = (sha256, source) =>
    this.#call(() => this.#deps.worker.stageSource(this.#accountId, sha256, source, { signal: this.#signal }));
  #accountId: string;
  #config: MailboxConfig;
  #deps: AccountDeps;
  #signal: AbortSignal;
  #initialSync: PendingInitialSync;
  /** What the Worker waits for before deleting emails in no folder (gateway/evidence.ts). */
  readonly evidence: Evidence;
  #failed = deferred<never>();
  #closed = false;
  #clients = new Set<ImapFlow>();
  #command: CommandConnection;
  /** The first IDLE connection, which also reads the folder list (null before the start). */
  #primary: ImapFlow | null = null;
  #watchers = new Map<string, ImapFlow>();
  #features: ServerFeatures = { condstore: false, qresync: false, gmail: false, move: true };
  #listing = new FolderListing();
  #passes: FolderPasses;
  #poller: Poller;
  /** Calls to the Worker on their way (see `settled`). */
  #inFlight = new Set<Promise<unknown>>();
  /** This session's batches: a batch of it arriving after a later session's is refused by the Worker. */
  #stream = newChangeStream();

  constructor(
    accountId: string,
    config: MailboxConfig,
    cursors: Map<string, FolderCursor>,
    initialSync: PendingInitialSync,
    evidence: Evidence,
    deps: AccountDeps,
    log: Logger,
    signal: AbortSignal,
  ) {
    this.#accountId = accountId;
    this.#config = config;
    this.cursors = cursors;
    this.#initialSync = initialSync;
    this.evidence = evidence;
    this.#deps = deps;
    this.log = log;
    this.#signal = signal;
    this.changes = new FolderChanges(() => this.#features, deps.settings.flagScanPage);
    this.#passes = new FolderPasses(this);
    this.#command = new CommandConnection(
      { open: () => this.#connect({ disableAutoIdle: true }), drop: (client) => this.#dropClient(client) },
      deps.settings.commandIdleMs,
    );
    this.#poller = new Poller(deps.settings.pollIntervalMs, {
      refresh: () => this.refreshListing(),
      listing: this.#listing,
      cursors,
      features: () => this.#features,
      pending: (path) => this.#passes.pending(path),
      wake: (path) => this.wake(path),
      fail: (err) => this.fail(err),
      log,
      pacer: deps.pacer,
    });
    this.#failed.promise.catch(() => undefined);
  }

  /** Rejects (never resolves) when the session breaks. */
  get failed(): Promise<never> {
    return this.#failed.promise;
  }

  /** The command connection, for the mailbox commands (null after the end). */
  get command(): CommandConnection | null {
    return this.#closed ? null : this.#command;
  }

  /**
   * How passes and watchers open a folder: read-only (EXAMINE), except on servers without CONDSTORE.
   * Courier, one of them, numbers new mail in a read-only session without saving the UIDs (the next
   * APPEND gets the same UID: mail lost) and keeps no UIDVALIDITY for a folder never opened read-write.
   * A read-write session changes nothing by itself: fetches PEEK, and folders are re-opened read-only
   * before CLOSE (command-connection.ts).
   */
  #selectMode(): { readOnly: boolean } {
    return { readOnly: this.#features.condstore };
  }

  features(): ServerFeatures {
    return this.#features;
  }

  listing(): Map<string, FolderInfo> {
    return this.#listing.folders;
  }

  isClosed(): boolean {
    return this.#closed;
  }

  fail(err: unknown): void {
    if (this.#closed) return;
    this.#failed.reject(err);
    this.close();
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    // Whoever waits on `failed` (the account's run loop) must wake up, or stop() would hang.
    this.#failed.reject(new Aborted());
    this.#poller.stop();
    this.#command.close();
    for (const client of this.#clients) client.close();
    this.#clients.clear();
  }

  /** Connects, reports the folder list, opens the IDLE connection(s) and catches every folder up. */
  async start(): Promise<void> {
    const started = Date.now();
    const primary = await this.#connect(WATCHER_OPTIONS);
    this.#primary = primary;
    this.#features = featuresOf(primary);
    const listedMark = this.evidence.mark;
    const began = nextStamp();
    const folders = await listFolders(primary);
    await this.send([{ type: 'folders', folders, began }]);
    this.#listing.start(folders);
    this.evidence.listed(listedMark);
    const watched = chooseWatched(folders, this.#features.gmail, this.#deps.settings.maxExtraIdle);
    const [first, ...extra] = watched;
    if (first) await this.#watch(primary, first);
    await Promise.all(extra.map(async (path) => this.#watch(await this.#connect(WATCHER_OPTIONS), path)));
    // A folder the server refuses does not stop the others (see FolderPasses).
    await Promise.all(folders.filter(isSelectable).map((f) => this.#passes.wake(f.path)));
    this.log.info('synced', {
      folders: folders.length,
      watched: watched.length,
      ...this.#features,
      ms: Date.now() - started,
    });
    this.#poller.start();
    this.#startInitialSync();
  }

  /** A notification, a poll or a command of ours touched a folder: sync it now (resolves when synced). */
  async wake(path: string): Promise<void> {
    const others = alsoWake(path, this.#listing.folders, this.#features.gmail);
    await Promise.all([path, ...others].map((p) => this.#passes.wake(p)));
  }

  async inFolder<T>(path: string, work: (client: ImapFlow, fresh: boolean) => Promise<T>): Promise<T> {
    if (this.#closed) throw new Aborted('session closed');
    const watcher = this.#watchers.get(path);
    if (watcher) {
      const lock = await watcher.getMailboxLock(path, this.#selectMode());
      try {
        return await work(watcher, false);
      } finally {
        lock.release();
      }
    }
    return this.#command.turn(async (client) => {
      const lock = await client.getMailboxLock(path, this.#selectMode());
      try {
        return await work(client, true);
      } finally {
        lock.release();
      }
    });
  }

  /**
   * Reads the folder list (with STATUS) and reports it when it changed: on `from` (a connection the
   * caller holds a folder on), else on the primary connection. The numbers of the folder selected
   * there come from the session's own view: a NOOP first brings that view up to date (Cyrus tells an
   * IDLE session of another session's expunge only at its next command), and a pass reads that
   * folder on the same connection anyway.
   */
  async refreshListing(from?: ImapFlow): Promise<FolderInfo[]> {
    const primary = this.#primary;
    if (!primary || this.#closed) throw new Aborted('session closed');
    const listedMark = this.evidence.mark;
    if (!from) await primary.noop();
    const began = nextStamp();
    const folders = await listFolders(from ?? primary);
    const report = this.#listing.update(folders);
    if (report) await this.send([{ type: 'folders', folders, began }]);
    this.evidence.listed(listedMark);
    const listingReport = this.evidence.listingReport();
    if (listingReport) await this.send([listingReport]);
    for (const path of this.#listing.removed) this.#forgetFolder(path);
    // A folder just learnt is passed at once (a move into a folder created a moment before).
    for (const path of this.#listing.added) void this.#passes.wake(path);
    return folders;
  }

  #forgetFolder(path: string): void {
    this.#passes.forget(path);
    this.evidence.forget(path);
    const watcher = this.#watchers.get(path);
    if (!watcher) return;
    // A watched folder was deleted: drop its connection without ending the session (the primary
    // one stays: it reads the folder list).
    this.#watchers.delete(path);
    if (watcher !== this.#primary) this.#dropClient(watcher);
  }

  /** Pulls the initial sync's older mail page by page in turns of the command connection, while the live sync goes on. */
  #startInitialSync(): void {
    const pending = this.#initialSync;
    const plan = pending.plan;
    const command = this.#command;
    if (!plan) return;
    const send = async (changes: Change[]) =>
      void (await this.#call(() =>
        this.#deps.worker.changes(this.#accountId, changes, { signal: this.#signal, stream: this.#stream }),
      ));
    pullInitialSync(plan, {
      turn: (work) => command.turn(work),
      stage: this.stage,
      maxMessageBytes: this.maxMessageBytes,
      gmail: this.#features.gmail,
      listing: this.#listing.folders,
      send,
      log: this.log,
    }).then(
      () => {
        pending.plan = null;
      },
      (err: unknown) => {
        if (!(err instanceof Aborted)) this.fail(err);
      },
    );
  }

  async #connect(extra: Partial<ImapFlowOptions>): Promise<ImapFlow> {
    const { connectTimeoutMs, qresync, condstore, maxMessageBytes } = this.#deps.settings;
    const options = imapOptions(
      this.#config.imap,
      { timeoutMs: connectTimeoutMs, qresync, condstore, maxMessageBytes },
      { socketTimeout: SOCKET_TIMEOUT_MS, ...extra },
    );
    const client = await openImap(options);
    if (this.#closed) {
      client.close();
      throw new Aborted('session closed');
    }
    this.#clients.add(client);
    client.on('close', () =>
      this.fail(Object.assign(new Error('IMAP connection closed'), { code: 'EConnectionClosed' })),
    );
    client.on('error', (err: Error) => this.fail(err));
    // New mail: background work (polls, heartbeats) waits until the Worker has it (gateway/pacer.ts).
    client.on('exists', (ev) => void this.#deps.pacer.urgent(this.wake(ev.path)));
    client.on('flags', (ev) => void this.wake(ev.path));
    client.on('expunge', (ev) => {
      this.changes.heardExpunge(ev, Number(client.mailbox ? client.mailbox.uidValidity : 0));
      // EARLIER ones arrive during our own fetch, which is already part of a pass.
      if (!ev.earlier) void this.wake(ev.path);
    });
    return client;
  }

  async #watch(client: ImapFlow, path: string): Promise<void> {
    // Selecting it is enough: with autoIdleDelay 0, IDLE starts once the lock is released.
    const lock = await client.getMailboxLock(path, this.#selectMode());
    lock.release();
    this.#watchers.set(path, client);
  }

  /** Closes one connection on purpose, without ending the session. */
  #dropClient(client: ImapFlow): void {
    this.#clients.delete(client);
    client.removeAllListeners('close');
    client.close();
  }

  /** Resolves when no call of this session to the Worker is on its way any more. */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.#inFlight]);
  }

  /** A call to the Worker; refused once the session is closed (its passes may still be winding down). */
  #call<T>(call: () => Promise<T>): Promise<T> {
    if (this.#closed) return Promise.reject(new Aborted('session closed'));
    const running = call();
    this.#inFlight.add(running);
    running.then(
      () => this.#inFlight.delete(running),
      () => this.#inFlight.delete(running),
    );
    return running;
  }

  /** Sends one batch of changes; afterwards the Worker's cursors of those folders are ours. */
  get moveSettleMs(): number {
    return this.#deps.settings.moveSettleMs;
  }

  get maxMessageBytes(): number {
    return this.#deps.settings.maxMessageBytes;
  }

  pollSoon(delayMs: number): void {
    this.#poller.soon(delayMs);
  }

  async send(changes: Change[]): Promise<void> {
    if (!changes.length) return;
    const response = await this.#call(() =>
      this.#deps.worker.changes(this.#accountId, changes, { signal: this.#signal, stream: this.#stream }),
    );
    this.evidence.take(response.orphans);
    const touched = new Set(
      changes.flatMap((c) => (c.type === 'folders' ? c.folders.map((f) => f.path) : 'path' in c ? [c.path] : [])),
    );
    for (const change of changes) {
      if (change.type === 'cursor')
        this.cursors.set(change.path, {
          path: change.path,
          uidvalidity: change.uidvalidity,
          last_uid: change.last_uid,
          highest_modseq: change.highest_modseq,
        });
    }
    for (const cursor of response.cursors) {
      if (!touched.has(cursor.path)) continue;
      if (this.cursors.get(cursor.path)?.uidvalidity !== cursor.uidvalidity) this.changes.renumbered(cursor.path);
      this.cursors.set(cursor.path, cursor);
    }
  }
}
