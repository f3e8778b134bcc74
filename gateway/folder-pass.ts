/**
 * The pass over one folder (coalesced per folder: a request during a pass schedules exactly one
 * more). It reports, in this order: what changed among known messages (flags, expunges; read
 * first), new messages (UID > cursor), then the flags, expunges and the new cursor. When a pass
 * finds expunged messages it first fetches new mail in every other folder, so that a MOVE reaches
 * the Worker as "appeared there" before "vanished here"; every arrival relayed meanwhile carries
 * the expunges still to come (`vanishing`).
 *
 * On a server without MOVE another client moves a message with COPY and then EXPUNGE: a pass that
 * ran between the two would report a copy and then a delete. There, new mail found by a pass is held
 * back (the cursor stays) for `moveSettleMs`, then a poll looks at every folder, syncing first those
 * that lost messages: their pass relays the held mail with the expunges as `vanishing`, one move.
 */
import type { ImapFlow } from 'imapflow';
import type { Change, FolderCursor, FolderInfo } from '../common/relay.ts';
import { Coalescer } from './async.ts';
import { uidsUpTo, type FolderChanges, type FolderStatus } from './folder-changes.ts';
import { isSelectable, type ServerFeatures } from './imap.ts';
import type { Evidence } from './evidence.ts';
import { errorFields, type Logger } from './log.ts';
import { observeRelay } from './metrics.ts';
import type { StageSource } from './messages.ts';
import { fetchNew, type FetchHost, type NewMail } from './fetch-new.ts';
import { hasNewMail, mayHaveNewMail, statusOf } from './folder-status.ts';
import { mergeHints, sendSnapshot, sendTail, type ReadThrough } from './pass-tail.ts';
import { Aborted } from './worker-client.ts';

/** The server's words for a refused command, without anything of ours. */
function refusal(err: unknown): string {
  const text = (err as { responseText?: string }).responseText ?? (err instanceof Error ? err.message : '');
  return (text || 'NO').slice(0, 200);
}

/** What a pass needs of its session (gateway/session.ts). */
export interface PassHost {
  readonly log: Logger;
  /** How long new mail is held back on a server without MOVE (0: never). */
  readonly moveSettleMs: number;
  readonly cursors: Map<string, FolderCursor>;
  readonly changes: FolderChanges;
  readonly stage: StageSource;
  /** Messages larger than this are relayed without their body (GATEWAY_MAX_MESSAGE_BYTES). */
  readonly maxMessageBytes: number;
  readonly evidence: Evidence;
  features(): ServerFeatures;
  listing(): Map<string, FolderInfo>;
  isClosed(): boolean;
  /**
   * Runs `work` with the folder selected read-only, on its IDLE connection or in a turn of the
   * command connection; `fresh`: the folder was selected (EXAMINE) for this work.
   */
  inFolder<T>(path: string, work: (client: ImapFlow, fresh: boolean) => Promise<T>): Promise<T>;
  /** Reads and reports the folder list; `from`: the connection the caller is using already (it holds its turn). */
  refreshListing(from?: ImapFlow): Promise<FolderInfo[]>;
  send(changes: Change[]): Promise<void>;
  /** Asks for a poll within `delayMs`. */
  pollSoon(delayMs: number): void;
  fail(err: unknown): void;
}

export class FolderPasses {
  #host: PassHost;
  #runners = new Map<string, Coalescer>();
  /** Folders whose last pass the server refused (e.g. SELECT answered NO): retried at every poll. */
  #refused = new Set<string>();
  /** When the first notification not yet handled by a pass arrived, per folder (for the latency log). */
  #notifiedAt = new Map<string, number>();
  /** Expunges found but held back while other folders are caught up (sent as `vanishing` hints). */
  #pendingExpunges = new Map<string, { uidvalidity: number; uids: number[] }>();
  /** Since when new mail of a folder has been held back (servers without MOVE; see the top). */
  #heldSince = new Map<string, number>();

  constructor(host: PassHost) {
    this.#host = host;
  }

  /** A notification or a poll for a folder: sync it now (or right after the pass already running). */
  wake(path: string): Promise<void> {
    const folder = this.#host.listing().get(path);
    if (this.#host.isClosed() || !folder || !isSelectable(folder)) return Promise.resolve();
    if (!this.#notifiedAt.has(path)) this.#notifiedAt.set(path, performance.now());
    return this.#runner(path)
      .run()
      .catch((err: unknown) => this.#passFailed(path, err));
  }

  /**
   * The folder's last pass left work for the next poll: the server refused it, or new mail is held
   * back; or the Worker waits for a pass over it (emails in no folder, gateway/evidence.ts).
   */
  pending(path: string): boolean {
    return this.#refused.has(path) || this.#heldSince.has(path) || this.#host.evidence.needs(path);
  }

  /** A folder gone from the listing. */
  forget(path: string): void {
    this.#runners.delete(path);
    this.#refused.delete(path);
    this.#notifiedAt.delete(path);
    this.#heldSince.delete(path);
    this.#host.changes.forget(path);
  }

  #runner(path: string): Coalescer {
    let runner = this.#runners.get(path);
    if (!runner) {
      runner = new Coalescer(() => this.#syncFolder(path));
      this.#runners.set(path, runner);
    }
    return runner;
  }

  #passFailed(path: string, err: unknown): void {
    const host = this.#host;
    if (host.isClosed() || err instanceof Aborted) return;
    if ((err as { mailboxMissing?: boolean }).mailboxMissing) {
      // Deleted or renamed meanwhile: the next poll reports the new folder list.
      host.log.info('folder disappeared', { path });
      return;
    }
    if ((err as { responseStatus?: string }).responseStatus === 'NO') {
      // One folder the server will not open right now (permissions, a broken mailbox): the rest of
      // the account goes on, the account's last_error names it, and the next poll tries it again.
      if (!this.#refused.has(path)) {
        host.log.warn('folder refused by the server, retrying', { path, ...errorFields(err) });
        this.#reportProblem(path, `the server refuses it: ${refusal(err)}`);
      }
      this.#refused.add(path);
      return;
    }
    host.fail(err);
  }

  async #syncFolder(path: string): Promise<void> {
    this.#host.log.debug('pass', { path });
    await this.#passOver(path);
    if (this.#refused.delete(path)) {
      this.#host.log.info('folder readable again', { path });
      this.#reportProblem(path, null);
    }
  }

  /** The account's last_error names a folder that cannot make progress (null: it can again). */
  #reportProblem(path: string, problem: string | null): void {
    this.#host.send([{ type: 'folder_problem', path, problem }]).catch((err: unknown) => this.#passFailed(path, err));
  }

  async #passOver(path: string): Promise<void> {
    const host = this.#host;
    const notifiedAt = this.#notifiedAt.get(path);
    this.#notifiedAt.delete(path);
    // Evidence for emails in no folder: this pass begins after every one marked up to here left.
    const started = host.evidence.mark;
    const found = await host.inFolder(path, async (client, fresh) => {
      const status = await statusOf(client, path, fresh);
      const differs = () => {
        const known = host.cursors.get(path);
        return !!known && known.uidvalidity !== status.uidvalidity;
      };
      // The Worker learns of a new UIDVALIDITY from the folder list: send it before any message under
      // it. Its answer may settle the difference: a folder renamed onto this path brings its cursor
      // (its expunges since then are read as usual), a reset brings an empty one (read from scratch).
      if (differs()) await host.refreshListing(client);
      const reset = differs();
      const base = this.#baseline(path, status);
      // What changed among the messages the Worker knows is read first: expunges found here ride
      // along with this folder's new mail as a hint (a message that left and came back under a new
      // UID stays one email, not a second copy).
      const tail = await host.changes.read(client, path, { base, lastUid: base.last_uid, status, reset });
      const gone = host.changes.gone(path, tail);
      if (gone.length) this.#pendingExpunges.set(path, { uidvalidity: status.uidvalidity, uids: gone });
      // Without an earlier snapshot (the session's first pass, no QRESYNC) nothing tells which UIDs
      // left: the snapshot goes before the new mail, so a message that left and came back under a new
      // UID finds its email orphaned (same id), not still here (which would make it a second copy).
      if (!reset && base.last_uid > 0 && host.changes.goneUnknown(path, tail) && mayHaveNewMail(status, base))
        await sendSnapshot(host, path, status.uidvalidity, tail.snapshot ?? [], base.last_uid);
      let read: ReadThrough;
      try {
        read = await this.#fetchUnlessHeld(client, path, status, base);
      } finally {
        this.#pendingExpunges.delete(path);
      }
      const lastUid = read.lastUid;
      if (lastUid > base.last_uid && notifiedAt !== undefined) {
        observeRelay(notifiedAt);
        host.log.debug('relayed new mail', {
          path,
          last_uid: lastUid,
          since_notify_ms: Math.round((performance.now() - notifiedAt) * 10) / 10,
        });
      }
      if (tail.removed) return { tail, gone };
      // A snapshot covers every UID up to the cursor, the new ones included.
      if (tail.snapshot && lastUid > base.last_uid) tail.snapshot = await uidsUpTo(client, lastUid);
      await sendTail(host, path, tail, read, started);
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
    await host.inFolder(path, async (client, fresh) => {
      const status = await statusOf(client, path, fresh);
      const read = await this.#fetchUnlessHeld(client, path, status, this.#baseline(path, status));
      if (found.tail.snapshot) found.tail.snapshot = await uidsUpTo(client, read.lastUid);
      await sendTail(host, path, found.tail, read, started);
    });
  }

  /** The cursor a pass starts from: the Worker's, or "nothing known" for a new folder or a new UIDVALIDITY. */
  #baseline(path: string, status: FolderStatus): FolderCursor {
    const cursor = this.#host.cursors.get(path);
    if (cursor && cursor.uidvalidity === status.uidvalidity) return cursor;
    return { path, uidvalidity: status.uidvalidity, last_uid: 0, highest_modseq: null };
  }

  /** #fetchNew, unless new mail is held back (see the top; never while the folder is re-read): then the cursor stays at the baseline. */
  async #fetchUnlessHeld(
    client: ImapFlow,
    path: string,
    status: FolderStatus,
    base: FolderCursor,
  ): Promise<ReadThrough> {
    const host = this.#host;
    const settleMs = host.moveSettleMs;
    // A folder being read again (renumbered: on Courier, every rename) is never held: its messages
    // are found again by identity, and its re-read ends only once it is read through.
    const rereading = host.cursors.get(path)?.resync === true;
    if (host.features().move || settleMs === 0 || rereading) return this.#fetchNew(client, path, status, base);
    const now = performance.now();
    const since = this.#heldSince.get(path) ?? now;
    if (now - since >= settleMs || !(await hasNewMail(client, status, base))) {
      this.#heldSince.delete(path);
      return this.#fetchNew(client, path, status, base);
    }
    if (!this.#heldSince.has(path)) {
      // The poll asked for below relays the mail; should it be slow (a busy account), this pass comes
      // back on its own (held mail keeps the folder's pass from counting as evidence for emails in no folder).
      setTimeout(() => void this.wake(path), 2 * settleMs).unref();
    }
    this.#heldSince.set(path, since);
    host.log.debug('new mail held back until the other folders are checked', { path });
    host.pollSoon(settleMs - (now - since));
    return { lastUid: base.last_uid, complete: false };
  }

  /** Fetches and relays new mail (gateway/fetch-new.ts); `ownGone`: this folder's expunges, sent as hints too. */
  #fetchNew(
    client: ImapFlow,
    path: string,
    status: FolderStatus,
    base: FolderCursor,
    ownGone: number[] = [],
  ): Promise<NewMail> {
    const host = this.#host;
    const own = ownGone.length ? [{ path, uidvalidity: status.uidvalidity, uids: ownGone }] : [];
    const fetchHost: FetchHost = {
      log: host.log,
      stage: host.stage,
      maxMessageBytes: host.maxMessageBytes,
      gmail: () => host.features().gmail,
      hints: () =>
        mergeHints([
          ...[...this.#pendingExpunges].map(([from, e]) => ({ path: from, ...e })),
          ...own,
          ...host.changes.heard(),
        ]),
      send: (changes) => host.send(changes),
    };
    return fetchNew(fetchHost, client, path, status, base);
  }

  /** Relays new mail of every other folder (one LIST-STATUS, then a fetch where UIDNEXT moved; new folders are reported first). */
  async #catchUpOthers(except: string): Promise<void> {
    const host = this.#host;
    // Folders this listing adds are caught up too: a message may have moved into one just created.
    const folders = await host.refreshListing();
    const behind = folders.filter((f) => {
      if (f.path === except || !isSelectable(f)) return false;
      const cursor = host.cursors.get(f.path);
      return (
        !cursor || cursor.resync === true || cursor.uidvalidity !== f.uidvalidity || f.uidnext > cursor.last_uid + 1
      );
    });
    host.log.debug('checking other folders first', { path: except, behind: behind.map((f) => f.path).join(',') });
    await Promise.all(
      behind.map((f) =>
        host
          .inFolder(f.path, async (client, fresh) => {
            const status = await statusOf(client, f.path, fresh);
            const base = this.#baseline(f.path, status);
            // Its own expunges ride along too: a message that left this folder and came back under a
            // new UID is the same email, not a second copy beside its old place.
            const own = await host.changes.peekGone(client, f.path, status, base);
            const read = await this.#fetchNew(client, f.path, status, base, own);
            // The Worker now holds them there: the folder's next pass must see them leave.
            host.changes.caughtUp(f.path, status.uidvalidity, read.relayed);
            this.#heldSince.delete(f.path);
          })
          .catch((err: unknown) => this.#passFailed(f.path, err)),
      ),
    );
  }
}
