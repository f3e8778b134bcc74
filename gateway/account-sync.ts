/**
 * One leased account: keeps its IMAP connections open and relays every change to the Worker.
 *
 * Connections of a session (one connected period; any dropped connection ends the session and a
 * new one starts with backoff):
 *  - control: LIST/STATUS poll of the folder list and of folders nobody IDLEs on; also runs the
 *    sync passes of those folders (each pass SELECTs the folder under imapflow's mailbox lock);
 *  - watchers: one connection per watched folder (INBOX + special-use folders), IDLE-ing. IDLE
 *    is re-entered as soon as a pass releases the mailbox lock (autoIdleDelay 0).
 *
 * A pass over one folder (`#syncFolder`, coalesced per folder) reports, in this order: new
 * messages (UID > cursor), then flags, expunges and the new cursor. When a pass finds expunged
 * messages it first fetches new mail in every other folder, so that a MOVE reaches the Worker as
 * "appeared there" before "vanished here".
 *
 * Nothing is kept durably. The cursors in memory are the Worker's (lease response, then each
 * changes response); a cursor change is only sent after everything it covers, in the same or an
 * earlier acknowledged call.
 */
import type { ExpungeEvent, ImapFlow, ImapFlowOptions } from 'imapflow';
import {
  BATCHES_IN_FLIGHT,
  MAX_BATCH_BYTES,
  MAX_BATCH_MESSAGES,
  type AccountStatus,
  type Change,
  type FlagUpdate,
  type FolderCursor,
  type FolderInfo,
  type InitialSyncPlan,
  type MailboxConfig,
  type MessageIn,
} from '../common/relay.ts';
import { backoffDelay, Coalescer, deferred, sleep } from './async.ts';
import type { SyncSettings } from './config.ts';
import { classifyError, isAuthFailure } from './errors.ts';
import {
  featuresOf,
  imapOptions,
  isSelectable,
  listFolders,
  openImap,
  STATUS_QUERY,
  type ServerFeatures,
} from './imap.ts';
import { pullInitialSync } from './initial-sync.ts';
import { errorFields, type Logger } from './log.ts';
import { hasUid, MESSAGE_OVERHEAD_BYTES, messageQuery, toFlagUpdate, toRelayed, type StageSource } from './messages.ts';
import { Aborted, isLeaseLost, WorkerHttpError, type WorkerClient } from './worker-client.ts';

/** Re-issue IDLE this often (servers may drop an IDLE older than 30 minutes, RFC 2177). */
const IDLE_RESTART_MS = 20 * 60_000;
/** Socket inactivity before imapflow probes with NOOP: how fast a silently dead server is noticed. */
const SOCKET_TIMEOUT_MS = 90_000;

export interface AccountDeps {
  worker: WorkerClient;
  settings: SyncSettings;
  log: Logger;
  /** The Worker says the lease is gone: the account has stopped itself. */
  onLeaseLost(accountId: string): void;
}

export interface AccountLease {
  config: MailboxConfig;
  cursors: FolderCursor[];
  initial_sync?: InitialSyncPlan;
}

/** The initial sync still to pull (gateway/initial-sync.ts); null once it ended. Kept across sessions. */
interface PendingInitialSync {
  plan: InitialSyncPlan | null;
}

export class AccountSync {
  readonly id: string;
  #config: MailboxConfig;
  #deps: AccountDeps;
  #log: Logger;
  #cursors = new Map<string, FolderCursor>();
  #initialSync: PendingInitialSync;
  #abort = new AbortController();
  #session: Session | null = null;
  #reported: AccountStatus | null = null;
  #done: Promise<void> = Promise.resolve();

  constructor(id: string, lease: AccountLease, deps: AccountDeps) {
    this.id = id;
    this.#config = lease.config;
    this.#deps = deps;
    this.#log = deps.log.child({ account: id });
    for (const cursor of lease.cursors) this.#cursors.set(cursor.path, cursor);
    this.#initialSync = { plan: lease.initial_sync ?? null };
  }

  start(): void {
    this.#done = this.#run();
  }

  /** Closes every connection at once; resolves when the account's loop has ended. */
  async stop(): Promise<void> {
    this.#abort.abort();
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

interface FolderStatus {
  uidvalidity: number;
  uidnext: number;
  highest_modseq: string | null;
}

/** What a pass found besides new messages; sent with the folder's new cursor. */
interface PassTail {
  flags: FlagUpdate[];
  vanished: number[];
  /** Set when expunges are found by listing UIDs (no QRESYNC, or a reset folder). */
  snapshot: number[] | null;
  /** Something was expunged: other folders are checked for new mail first. */
  removed: boolean;
  status: FolderStatus;
}

/** One connected period of an account. */
class Session {
  #accountId: string;
  #config: MailboxConfig;
  #cursors: Map<string, FolderCursor>;
  #deps: AccountDeps;
  #log: Logger;
  #signal: AbortSignal;
  #failed = deferred<never>();
  #closed = false;
  #clients = new Set<ImapFlow>();
  #control: ImapFlow | null = null;
  #watchers = new Map<string, ImapFlow>();
  #features: ServerFeatures = { condstore: false, qresync: false, gmail: false };
  #listing = new Map<string, FolderInfo>();
  #runners = new Map<string, Coalescer>();
  /** UIDs reported expunged by the server (VANISHED, live or EARLIER), not yet relayed. */
  #vanished = new Map<string, { uidvalidity: number; uids: Set<number> }>();
  /** Without CONDSTORE: the flags last relayed per UID, so only differences are sent. */
  #knownFlags = new Map<string, Map<number, string>>();
  /** Without QRESYNC: the UIDs of the last snapshot, to tell whether something disappeared. */
  #lastSnapshot = new Map<string, Set<number>>();
  /** Expunges found but held back while other folders are caught up (sent as `vanishing` hints). */
  #pendingExpunges = new Map<string, { uidvalidity: number; uids: number[] }>();
  #pollTimer: NodeJS.Timeout | undefined;
  /** Calls to the Worker on their way (see `settled`). */
  #inFlight = new Set<Promise<unknown>>();
  /** The last listing sent lacked a folder the one before had: the next listing is sent to confirm it. */
  #removalUnconfirmed = false;
  /** Folders whose last pass the server refused (e.g. SELECT answered NO): retried at every poll. */
  #refused = new Set<string>();
  /** When the first notification not yet handled by a pass arrived, per folder (for the latency log). */
  #notifiedAt = new Map<string, number>();

  #initialSync: PendingInitialSync;
  /** Large sources go to the Worker ahead of their change. */
  readonly #stage: StageSource = (sha256, source) =>
    this.#call(() => this.#deps.worker.stageSource(this.#accountId, sha256, source, { signal: this.#signal }));

  constructor(
    accountId: string,
    config: MailboxConfig,
    cursors: Map<string, FolderCursor>,
    initialSync: PendingInitialSync,
    deps: AccountDeps,
    log: Logger,
    signal: AbortSignal,
  ) {
    this.#initialSync = initialSync;
    this.#accountId = accountId;
    this.#config = config;
    this.#cursors = cursors;
    this.#deps = deps;
    this.#log = log;
    this.#signal = signal;
    this.#failed.promise.catch(() => undefined);
  }

  /** Rejects (never resolves) when the session breaks. */
  get failed(): Promise<never> {
    return this.#failed.promise;
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
    clearTimeout(this.#pollTimer);
    for (const client of this.#clients) client.close();
    this.#clients.clear();
  }

  /** Connects, reports the folder list, opens the IDLE connections and catches every folder up. */
  async start(): Promise<void> {
    const started = Date.now();
    const control = await this.#connect({ disableAutoIdle: true });
    this.#control = control;
    this.#features = featuresOf(control);
    const folders = await listFolders(control);
    await this.#send([{ type: 'folders', folders }]);
    this.#setListing(folders);
    const watched = chooseWatched(folders, this.#features.gmail, this.#deps.settings.maxExtraIdle);
    await Promise.all(watched.map((path) => this.#openWatcher(path)));
    // A folder the server refuses does not stop the others (see #passFailed).
    await Promise.all(
      [...this.#listing.values()].filter(isSelectable).map((f) =>
        this.#runner(f.path)
          .run()
          .catch((err: unknown) => this.#passFailed(f.path, err)),
      ),
    );
    this.#log.info('synced', {
      folders: folders.length,
      watched: watched.length,
      ...this.#features,
      ms: Date.now() - started,
    });
    this.#schedulePoll();
    this.#startInitialSync();
  }

  /** Pulls the initial sync's older mail on a connection of its own, while the live sync goes on. */
  #startInitialSync(): void {
    const pending = this.#initialSync;
    const plan = pending.plan;
    if (!plan) return;
    const run = async () => {
      const client = await this.#connect({ disableAutoIdle: true });
      try {
        const send = async (changes: Change[]) =>
          void (await this.#call(() => this.#deps.worker.changes(this.#accountId, changes, { signal: this.#signal })));
        await pullInitialSync(plan, {
          client,
          stage: this.#stage,
          gmail: this.#features.gmail,
          listing: this.#listing,
          send,
          log: this.#log,
        });
        pending.plan = null;
      } finally {
        this.#dropClient(client);
      }
    };
    run().catch((err: unknown) => {
      if (!(err instanceof Aborted)) this.fail(err);
    });
  }

  async #connect(extra: Partial<ImapFlowOptions>): Promise<ImapFlow> {
    const { connectTimeoutMs, qresync, condstore } = this.#deps.settings;
    const options = imapOptions(
      this.#config.imap,
      { timeoutMs: connectTimeoutMs, qresync, condstore },
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
    client.on('exists', (ev) => this.#wake(ev.path));
    client.on('flags', (ev) => this.#wake(ev.path));
    client.on('expunge', (ev) => this.#onExpunge(ev, Number(client.mailbox ? client.mailbox.uidValidity : 0)));
    return client;
  }

  async #openWatcher(path: string): Promise<void> {
    const client = await this.#connect({ autoIdleDelay: 0, maxIdleTime: IDLE_RESTART_MS });
    // Selecting it is enough: with autoIdleDelay 0, IDLE starts once the lock is released.
    const lock = await client.getMailboxLock(path, { readOnly: true });
    lock.release();
    this.#watchers.set(path, client);
  }

  #setListing(folders: FolderInfo[]): void {
    this.#listing = new Map(folders.map((f) => [f.path, f]));
  }

  #runner(path: string): Coalescer {
    let runner = this.#runners.get(path);
    if (!runner) {
      runner = new Coalescer(() => this.#syncFolder(path));
      this.#runners.set(path, runner);
    }
    return runner;
  }

  /** A notification for a folder: sync it now (or right after the pass already running). */
  #wake(path: string): void {
    const folder = this.#listing.get(path);
    if (this.#closed || !folder || !isSelectable(folder)) return;
    if (!this.#notifiedAt.has(path)) this.#notifiedAt.set(path, performance.now());
    this.#runner(path)
      .run()
      .catch((err: unknown) => this.#passFailed(path, err));
  }

  #passFailed(path: string, err: unknown): void {
    if (this.#closed || err instanceof Aborted) return;
    if ((err as { mailboxMissing?: boolean }).mailboxMissing) {
      // Deleted or renamed meanwhile: the next poll reports the new folder list.
      this.#log.info('folder disappeared', { path });
      return;
    }
    if (refusedByServer(err)) {
      // One folder the server will not open right now (permissions, a broken mailbox): the rest of
      // the account goes on, nothing is reported for it, and the next poll tries it again.
      if (!this.#refused.has(path))
        this.#log.warn('folder refused by the server, retrying', { path, ...errorFields(err) });
      this.#refused.add(path);
      return;
    }
    this.fail(err);
  }

  /**
   * An expunge the server announced, kept with the UIDVALIDITY it was announced under: UIDs of an
   * earlier numbering must never remove the messages that carry them after a reset.
   */
  #onExpunge(ev: ExpungeEvent, uidvalidity: number): void {
    if (ev.uid !== undefined) {
      let entry = this.#vanished.get(ev.path);
      if (!entry || entry.uidvalidity !== uidvalidity) {
        entry = { uidvalidity, uids: new Set<number>() };
        this.#vanished.set(ev.path, entry);
      }
      entry.uids.add(ev.uid);
    }
    // EARLIER ones arrive during our own fetch, which is already part of a pass.
    if (!ev.earlier) this.#wake(ev.path);
  }

  #clientFor(path: string): ImapFlow {
    const client = this.#watchers.get(path) ?? this.#control;
    if (!client || this.#closed) throw new Aborted('session closed');
    return client;
  }

  async #withFolder<T>(client: ImapFlow, path: string, fn: () => Promise<T>): Promise<T> {
    const lock = await client.getMailboxLock(path, { readOnly: true });
    try {
      return await fn();
    } finally {
      // The polling connection keeps no folder selected between passes: servers answer STATUS and
      // LIST-STATUS for a selected folder from that session's stale view (Dovecot and Courier alike),
      // and a selected folder deleted by another client ends the whole connection (BYE). CLOSE after
      // EXAMINE expunges nothing.
      if (client === this.#control && client.usable) await client.mailboxClose().catch(() => undefined);
      lock.release();
    }
  }

  /** Fresh state of the selected folder. */
  async #statusOf(client: ImapFlow, path: string): Promise<FolderStatus> {
    // A server answers for the selected folder from the session's own view, which may not have
    // caught up with other sessions yet (Dovecot: until its notify timer fires). NOOP syncs it,
    // and makes the following FETCH see the new messages too.
    await client.noop();
    const st = await client.status(path, { ...STATUS_QUERY });
    if (!st) throw Object.assign(new Error(`STATUS failed for a folder`), { mailboxMissing: true });
    return {
      uidvalidity: Number(st.uidValidity ?? 0),
      uidnext: st.uidNext ?? 0,
      highest_modseq: st.highestModseq !== undefined ? String(st.highestModseq) : null,
    };
  }

  /** The cursor a pass starts from: the Worker's, or "nothing known" for a new folder or a new UIDVALIDITY. */
  #baseline(path: string, status: FolderStatus): FolderCursor {
    const cursor = this.#cursors.get(path);
    if (cursor && cursor.uidvalidity === status.uidvalidity) return cursor;
    return { path, uidvalidity: status.uidvalidity, last_uid: 0, highest_modseq: null };
  }

  async #syncFolder(path: string): Promise<void> {
    this.#log.debug('pass', { path });
    await this.#passOver(path);
    if (this.#refused.delete(path)) this.#log.info('folder readable again', { path });
  }

  async #passOver(path: string): Promise<void> {
    const client = this.#clientFor(path);
    const notifiedAt = this.#notifiedAt.get(path);
    this.#notifiedAt.delete(path);
    const found = await this.#withFolder(client, path, async () => {
      const status = await this.#statusOf(client, path);
      const known = this.#cursors.get(path);
      const reset = !!known && known.uidvalidity !== status.uidvalidity;
      // The Worker learns of a new UIDVALIDITY from the folder list: send it before any message under it.
      if (reset) await this.#refreshListing();
      const base = this.#baseline(path, status);
      // What changed among the messages the Worker knows is read first: expunges found here ride
      // along with this folder's new mail as a hint (a message that left and came back under a new
      // UID stays one email, not a second copy).
      const tail = await this.#readChanges(client, path, { base, lastUid: base.last_uid, status, reset });
      const gone = this.#gone(path, tail);
      if (gone.length) this.#pendingExpunges.set(path, { uidvalidity: status.uidvalidity, uids: gone });
      let lastUid: number;
      try {
        lastUid = await this.#fetchNew(client, path, status, base);
      } finally {
        this.#pendingExpunges.delete(path);
      }
      if (lastUid > base.last_uid && notifiedAt !== undefined) {
        this.#log.debug('relayed new mail', {
          path,
          last_uid: lastUid,
          since_notify_ms: Math.round((performance.now() - notifiedAt) * 10) / 10,
        });
      }
      if (tail.removed) return { tail, gone };
      // A snapshot covers every UID up to the cursor, the new ones included.
      if (tail.snapshot && lastUid > base.last_uid) tail.snapshot = await this.#uidsUpTo(client, lastUid);
      await this.#sendTail(path, tail, lastUid);
      return null;
    });
    if (!found) return;
    // Something was expunged here. If it was moved, its new copy must be reported first, saying
    // which messages are about to go (the Worker matches an arrival with identical copies to them).
    if (found.gone.length)
      this.#pendingExpunges.set(path, { uidvalidity: found.tail.status.uidvalidity, uids: found.gone });
    try {
      await this.#catchUpOthers(path);
    } finally {
      this.#pendingExpunges.delete(path);
    }
    await this.#withFolder(client, path, async () => {
      const status = await this.#statusOf(client, path);
      const lastUid = await this.#fetchNew(client, path, status, this.#baseline(path, status));
      if (found.tail.snapshot) found.tail.snapshot = await this.#uidsUpTo(client, lastUid);
      await this.#sendTail(path, found.tail, lastUid);
    });
  }

  /**
   * Fetches and relays every message above the baseline's last UID, in batches. Returns the
   * folder's last UID (everything up to it has now been relayed or was expunged).
   */
  async #fetchNew(client: ImapFlow, path: string, status: FolderStatus, base: FolderCursor): Promise<number> {
    // STATUS ran before this FETCH, so every UID below its UIDNEXT is covered by it.
    let lastUid = Math.max(base.last_uid, status.uidnext - 1);
    if (status.uidnext !== 0 && status.uidnext <= base.last_uid + 1) return lastUid;
    const gmail = this.#features.gmail;
    const query = messageQuery(gmail);
    let batch: MessageIn[] = [];
    let bytes = 0;
    // Up to BATCHES_IN_FLIGHT batches travel to the Worker while the next is fetched; the Worker
    // applies them in the order they were sent (common/relay.ts ChangesSequence).
    const inFlight: Promise<void>[] = [];
    const flush = async (final: boolean) => {
      const changes: Change[] = [];
      const vanishing = [...this.#pendingExpunges].map(([from, e]) => ({ path: from, ...e }));
      if (batch.length)
        changes.push({
          type: 'messages',
          path,
          uidvalidity: status.uidvalidity,
          messages: batch,
          ...(vanishing.length && { vanishing }),
        });
      if (final)
        changes.push({
          type: 'cursor',
          path,
          uidvalidity: status.uidvalidity,
          last_uid: lastUid,
          highest_modseq: base.highest_modseq,
        });
      batch = [];
      bytes = 0;
      if (inFlight.length >= BATCHES_IN_FLIGHT) await inFlight.shift();
      const sent = this.#send(changes);
      sent.catch(() => undefined); // awaited below or in its turn; an early failure is not unhandled
      inFlight.push(sent);
      if (final) while (inFlight.length) await inFlight.shift();
    };
    let fetched = false;
    for await (const msg of client.fetch(`${base.last_uid + 1}:*`, query, { uid: true })) {
      // "n:*" also matches the highest UID when it is below n.
      if (!hasUid(msg) || msg.uid <= base.last_uid) continue;
      const message = await toRelayed(msg, gmail, this.#stage);
      // A staged source is not in the change, but the Worker reads it back while applying it.
      const size = (message.staged ? message.size : message.raw.length) + MESSAGE_OVERHEAD_BYTES;
      if (batch.length && (batch.length >= MAX_BATCH_MESSAGES || bytes + size > MAX_BATCH_BYTES)) await flush(false);
      batch.push(message);
      bytes += size;
      lastUid = Math.max(lastUid, msg.uid);
      fetched = true;
    }
    if (fetched) await flush(true);
    return lastUid;
  }

  /**
   * Flag changes and expunges among the messages the baseline already covered. `reset`: the
   * folder's UIDVALIDITY changed, so everything known under the old one is gone.
   */
  /** The UIDs a pass found expunged: QRESYNC's VANISHED, or what left since this session's last snapshot. */
  #gone(path: string, tail: PassTail): number[] {
    if (!tail.snapshot) return tail.vanished;
    const present = new Set(tail.snapshot);
    return [...(this.#lastSnapshot.get(path) ?? [])].filter((uid) => !present.has(uid));
  }

  async #readChanges(
    client: ImapFlow,
    path: string,
    { base, lastUid, status, reset }: { base: FolderCursor; lastUid: number; status: FolderStatus; reset: boolean },
  ): Promise<PassTail> {
    const { condstore, qresync, gmail } = this.#features;
    const mailbox = client.mailbox;
    const byModseq = condstore && base.highest_modseq !== null && !(mailbox && mailbox.noModseq);
    const flags: FlagUpdate[] = [];
    if (base.last_uid > 0 && !(byModseq && base.highest_modseq === status.highest_modseq)) {
      const known = byModseq ? null : this.#flagMemory(path);
      // With QRESYNC, imapflow adds VANISHED: expunged UIDs come back as 'expunge' events (EARLIER).
      const options = byModseq ? { uid: true, changedSince: BigInt(base.highest_modseq!) } : { uid: true };
      for await (const msg of client.fetch(
        `1:${base.last_uid}`,
        { uid: true, flags: true, ...(gmail && { labels: true }) },
        options,
      )) {
        if (!hasUid(msg) || msg.uid > base.last_uid) continue;
        const update = toFlagUpdate(msg, gmail);
        if (known) {
          const signature = JSON.stringify([update.flags, update.labels]);
          if (known.get(msg.uid) === signature) continue;
          known.set(msg.uid, signature);
        }
        flags.push(update);
      }
    }
    if (byModseq && qresync) {
      const entry = this.#vanished.get(path);
      this.#vanished.delete(path);
      const current = !!entry && entry.uidvalidity === status.uidvalidity && !reset;
      const vanished = current ? [...entry.uids].sort((a, b) => a - b) : [];
      return { flags, vanished, snapshot: null, removed: vanished.length > 0, status };
    }
    const snapshot = await this.#uidsUpTo(client, lastUid);
    const previous = this.#lastSnapshot.get(path);
    const present = new Set(snapshot);
    // Without an earlier snapshot in this session, anything may have gone.
    const removed = reset || (previous ? [...previous].some((uid) => !present.has(uid)) : base.last_uid > 0);
    this.#vanished.delete(path);
    return { flags, vanished: [], snapshot, removed, status };
  }

  #flagMemory(path: string): Map<number, string> {
    const known = this.#knownFlags.get(path) ?? new Map<number, string>();
    this.#knownFlags.set(path, known);
    return known;
  }

  async #uidsUpTo(client: ImapFlow, lastUid: number): Promise<number[]> {
    if (lastUid === 0) return [];
    const uids = await client.search({ uid: `1:${lastUid}` }, { uid: true });
    return (uids || []).filter((uid) => uid <= lastUid).sort((a, b) => a - b);
  }

  async #sendTail(path: string, tail: PassTail, lastUid: number): Promise<void> {
    const { uidvalidity, highest_modseq } = tail.status;
    const changes: Change[] = [];
    if (tail.flags.length) changes.push({ type: 'flags', path, uidvalidity, updates: tail.flags });
    if (tail.vanished.length) changes.push({ type: 'vanished', path, uidvalidity, uids: tail.vanished });
    if (tail.snapshot) changes.push({ type: 'snapshot', path, uidvalidity, uids: tail.snapshot });
    const cursor = this.#cursors.get(path);
    const moved =
      !cursor ||
      cursor.resync === true ||
      cursor.uidvalidity !== uidvalidity ||
      cursor.last_uid !== lastUid ||
      cursor.highest_modseq !== highest_modseq;
    if (!changes.length && !moved) return;
    changes.push({ type: 'cursor', path, uidvalidity, last_uid: lastUid, highest_modseq });
    await this.#send(changes);
    if (tail.snapshot) this.#lastSnapshot.set(path, new Set(tail.snapshot));
    for (const uid of tail.vanished) this.#knownFlags.get(path)?.delete(uid);
  }

  /** Relays new mail of every other folder (one LIST-STATUS, then a fetch where UIDNEXT moved; new folders are reported first). */
  async #catchUpOthers(except: string): Promise<void> {
    const { folders } = await this.#refreshListing();
    const behind = folders.filter((f) => {
      if (f.path === except || !this.#listing.has(f.path) || !isSelectable(f)) return false;
      const cursor = this.#cursors.get(f.path);
      return (
        !cursor || cursor.resync === true || cursor.uidvalidity !== f.uidvalidity || f.uidnext > cursor.last_uid + 1
      );
    });
    this.#log.debug('checking other folders first', { path: except, behind: behind.map((f) => f.path).join(',') });
    await Promise.all(
      behind.map((f) => {
        const client = this.#clientFor(f.path);
        return this.#withFolder(client, f.path, async () => {
          const status = await this.#statusOf(client, f.path);
          await this.#fetchNew(client, f.path, status, this.#baseline(f.path, status));
        }).catch((err: unknown) => this.#passFailed(f.path, err));
      }),
    );
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
  async #send(changes: Change[]): Promise<void> {
    if (!changes.length) return;
    const response = await this.#call(() =>
      this.#deps.worker.changes(this.#accountId, changes, { signal: this.#signal }),
    );
    const touched = new Set(
      changes.flatMap((c) => (c.type === 'folders' ? c.folders.map((f) => f.path) : 'path' in c ? [c.path] : [])),
    );
    for (const change of changes) {
      if (change.type === 'cursor')
        this.#cursors.set(change.path, {
          path: change.path,
          uidvalidity: change.uidvalidity,
          last_uid: change.last_uid,
          highest_modseq: change.highest_modseq,
        });
    }
    for (const cursor of response.cursors) {
      if (!touched.has(cursor.path)) continue;
      // A new UIDVALIDITY: expunges heard under the old one mean nothing any more.
      if (this.#cursors.get(cursor.path)?.uidvalidity !== cursor.uidvalidity) this.#vanished.delete(cursor.path);
      this.#cursors.set(cursor.path, cursor);
    }
  }

  #schedulePoll(): void {
    if (this.#closed) return;
    this.#pollTimer = setTimeout(() => {
      this.#poll().then(
        () => this.#schedulePoll(),
        (err: unknown) => this.fail(err),
      );
    }, this.#deps.settings.pollIntervalMs);
  }

  /** Reads the folder list (with STATUS) and reports it when it changed. Returns the previous one. */
  async #refreshListing(): Promise<{ folders: FolderInfo[]; previous: Map<string, FolderInfo> }> {
    if (!this.#control || this.#closed) throw new Aborted('session closed');
    const folders = await listFolders(this.#control);
    const previous = this.#listing;
    const unchanged =
      folders.length === previous.size &&
      folders.every((f) => previous.has(f.path) && listingKey(f) === listingKey(previous.get(f.path)!));
    // The Worker deletes a folder only when a second listing confirms it is gone: after a listing
    // that lost a folder, the next one is sent even when nothing changed.
    const lostFolder = [...previous.keys()].some((path) => !folders.some((f) => f.path === path));
    if (!unchanged || this.#removalUnconfirmed) await this.#send([{ type: 'folders', folders }]);
    this.#removalUnconfirmed = !unchanged && lostFolder;
    this.#setListing(folders);
    for (const path of [...this.#watchers.keys()]) if (!this.#listing.has(path)) this.#retireWatcher(path);
    return { folders, previous };
  }

  /** The folder list and the state of folders nobody IDLEs on (also a safety net for the others). */
  async #poll(): Promise<void> {
    const { folders, previous } = await this.#refreshListing();
    for (const folder of folders) {
      if (!isSelectable(folder)) continue;
      const last = previous.get(folder.path);
      const cursor = this.#cursors.get(folder.path);
      const changed =
        !last ||
        last.uidnext !== folder.uidnext ||
        last.highest_modseq !== folder.highest_modseq ||
        last.total !== folder.total;
      const behind =
        !cursor ||
        cursor.resync === true ||
        cursor.uidvalidity !== folder.uidvalidity ||
        folder.uidnext > cursor.last_uid + 1;
      if (changed || behind || this.#refused.has(folder.path)) {
        this.#log.debug('poll wakes', { path: folder.path, changed, behind });
        this.#wake(folder.path);
      }
    }
  }

  /** A watched folder was deleted: drop its connection without ending the session. */
  #retireWatcher(path: string): void {
    const client = this.#watchers.get(path);
    if (!client) return;
    this.#watchers.delete(path);
    this.#runners.delete(path);
    this.#dropClient(client);
  }

  /** Closes one connection on purpose, without ending the session. */
  #dropClient(client: ImapFlow): void {
    this.#clients.delete(client);
    client.removeAllListeners('close');
    client.close();
  }
}

/** INBOX plus up to `max` special-use folders that receive mail outside the client; Gmail's All Mail first. */
export function chooseWatched(folders: FolderInfo[], gmail: boolean, max: number): string[] {
  const selectable = folders.filter(isSelectable);
  const inbox = selectable.find((f) => f.path.toUpperCase() === 'INBOX');
  const order = gmail
    ? ['\\All', '\\Sent', '\\Drafts', '\\Trash', '\\Junk', '\\Archive']
    : ['\\Sent', '\\Drafts', '\\Trash', '\\Junk', '\\Archive', '\\All'];
  const extra = order.flatMap((use) => selectable.filter((f) => f.special_use === use && f !== inbox)).slice(0, max);
  return [...(inbox ? [inbox] : []), ...extra].map((f) => f.path);
}

/** An IMAP NO answer: the server refused this command (for one folder), the connection is fine. */
function refusedByServer(err: unknown): boolean {
  return (err as { responseStatus?: string }).responseStatus === 'NO';
}

/** The parts of a folder that the `folders` change carries and the Worker stores. */
function listingKey(f: FolderInfo): string {
  return JSON.stringify([f.path, f.delimiter, f.flags, f.special_use, f.uidvalidity, f.total]);
}
