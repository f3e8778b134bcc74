/**
 * What changed among the messages of a folder the Worker already knows: flags and expunges.
 *
 *  - Flags: with CONDSTORE, FETCH CHANGEDSINCE the cursor's MODSEQ (nothing kept here). Without it,
 *    every pass re-reads the flags of the whole folder in one FETCH and compares them page by page
 *    (`flagScanPage` messages each) with a 32-bit digest of the page last relayed: only pages that
 *    differ are sent, and a folder costs one number per page, no per-UID map.
 *  - Expunges: with QRESYNC, VANISHED (live or EARLIER) UIDs heard by the connections; without it, a
 *    snapshot of the UIDs (kept as a packed array, 4 bytes a message) compared with the last one.
 */
import type { ExpungeEvent, ImapFlow } from 'imapflow';
import type { FlagUpdate, FolderCursor } from '../common/relay.ts';
import type { ServerFeatures } from './imap.ts';
import { hasUid, toFlagUpdate } from './messages.ts';

export interface FolderStatus {
  uidvalidity: number;
  uidnext: number;
  highest_modseq: string | null;
  /** From the EXAMINE of this pass; false: from STATUS of a folder the connection had selected, maybe behind. */
  exact: boolean;
}

/** What a pass found besides new messages; sent with the folder's new cursor. */
export interface PassTail {
  flags: FlagUpdate[];
  vanished: number[];
  /** Set when expunges are found by listing UIDs (no QRESYNC, or a reset folder). */
  snapshot: number[] | null;
  /** Something was expunged: other folders are checked for new mail first. */
  removed: boolean;
  status: FolderStatus;
  /** Without CONDSTORE: the page digests to remember once the tail is acknowledged. */
  digests: Uint32Array | null;
}

export class FolderChanges {
  #features: () => ServerFeatures;
  #pageSize: number;
  /** UIDs reported expunged by the server (VANISHED, live or EARLIER), not yet relayed. */
  #vanished = new Map<string, { uidvalidity: number; uids: Set<number> }>();
  /** Without CONDSTORE: a digest per page of the flags last relayed. */
  #flagDigests = new Map<string, Uint32Array>();
  /** The UIDs of the last snapshot relayed (ascending), with the UIDVALIDITY they belong to. */
  #lastSnapshot = new Map<string, { uidvalidity: number; uids: Uint32Array }>();

  constructor(features: () => ServerFeatures, pageSize: number) {
    this.#features = features;
    this.#pageSize = Math.max(1, pageSize);
  }

  /**
   * An expunge the server announced, kept with the UIDVALIDITY it was announced under: UIDs of an
   * earlier numbering must never remove the messages that carry them after a reset.
   */
  heardExpunge(ev: ExpungeEvent, uidvalidity: number): void {
    if (ev.uid === undefined) return;
    let entry = this.#vanished.get(ev.path);
    if (!entry || entry.uidvalidity !== uidvalidity) {
      entry = { uidvalidity, uids: new Set<number>() };
      this.#vanished.set(ev.path, entry);
    }
    entry.uids.add(ev.uid);
  }

  /**
   * Expunges heard in every folder and not relayed yet: hints for mail arriving elsewhere (a move's
   * source may be heard before its folder's pass reports it).
   */
  heard(): { path: string; uidvalidity: number; uids: number[] }[] {
    return [...this.#vanished]
      .filter(([, entry]) => entry.uids.size > 0)
      .map(([path, entry]) => ({ path, uidvalidity: entry.uidvalidity, uids: [...entry.uids] }));
  }

  /** The folder's numbering changed: expunges heard under the old one mean nothing any more. */
  renumbered(path: string): void {
    this.#vanished.delete(path);
    this.#flagDigests.delete(path);
    this.#lastSnapshot.delete(path);
  }

  async read(
    client: ImapFlow,
    path: string,
    { base, lastUid, status, reset }: { base: FolderCursor; lastUid: number; status: FolderStatus; reset: boolean },
  ): Promise<PassTail> {
    const { condstore, qresync } = this.#features();
    const mailbox = client.mailbox;
    const byModseq = condstore && base.highest_modseq !== null && !(mailbox && mailbox.noModseq);
    let flags: FlagUpdate[] = [];
    let digests: Uint32Array | null = null;
    if (base.last_uid > 0 && byModseq && base.highest_modseq !== status.highest_modseq) {
      // With QRESYNC, imapflow adds VANISHED: expunged UIDs come back as 'expunge' events (EARLIER).
      flags = await this.#fetchFlags(client, base.last_uid, { changedSince: BigInt(base.highest_modseq!) });
    } else if (base.last_uid > 0 && !byModseq) {
      ({ flags, digests } = await this.#scanFlags(client, path, base.last_uid, reset));
    }
    if (byModseq && qresync) {
      const entry = this.#vanished.get(path);
      this.#vanished.delete(path);
      const current = !!entry && entry.uidvalidity === status.uidvalidity && !reset;
      const vanished = current ? [...entry.uids].sort((a, b) => a - b) : [];
      return { flags, vanished, snapshot: null, removed: vanished.length > 0, status, digests };
    }
    const snapshot = await uidsUpTo(client, lastUid);
    const previous = this.#previousSnapshot(path, status.uidvalidity, reset);
    const present = new Set(snapshot);
    // Without an earlier snapshot in this session, anything may have gone.
    const removed = reset || (previous ? previous.some((uid) => !present.has(uid)) : base.last_uid > 0);
    this.#vanished.delete(path);
    return { flags, vanished: [], snapshot, removed, status, digests };
  }

  /**
   * The UIDs a pass found expunged: QRESYNC's VANISHED, or what left since this session's last
   * snapshot of the same numbering (UIDs of an earlier UIDVALIDITY name other messages, or none).
   */
  gone(path: string, tail: PassTail): number[] {
    if (!tail.snapshot) return tail.vanished;
    return this.#leftSinceSnapshot(path, tail.status.uidvalidity, tail.snapshot);
  }

  /**
   * What left the selected folder since the Worker's view, as far as it can be told without taking
   * the pass's tail: VANISHED heard under this numbering (QRESYNC), else a UID listing compared with
   * this session's last snapshot. Nothing is consumed: the folder's own pass reports these later.
   */
  async peekGone(client: ImapFlow, path: string, status: FolderStatus, base: FolderCursor): Promise<number[]> {
    const lastUid = base.last_uid;
    const { condstore, qresync } = this.#features();
    if (qresync && condstore && base.highest_modseq !== null && lastUid > 0 && base.uidvalidity === status.uidvalidity)
      // With QRESYNC, imapflow adds VANISHED: the expunges since then come back as 'expunge' events.
      await this.#fetchFlags(client, lastUid, { changedSince: BigInt(base.highest_modseq) });
    const heard = this.#vanished.get(path);
    if (heard && heard.uidvalidity === status.uidvalidity) return [...heard.uids].sort((a, b) => a - b);
    if (!this.#previousSnapshot(path, status.uidvalidity, false) || lastUid === 0) return [];
    return this.#leftSinceSnapshot(path, status.uidvalidity, await uidsUpTo(client, lastUid), lastUid);
  }

  /** UIDs (up to `upTo`) of this session's last snapshot under this numbering that `present` lacks. */
  #leftSinceSnapshot(path: string, uidvalidity: number, present: number[], upTo = Number.POSITIVE_INFINITY): number[] {
    const now = new Set(present);
    const previous = this.#previousSnapshot(path, uidvalidity, false);
    return [...(previous ?? [])].filter((uid) => uid <= upTo && !now.has(uid));
  }

  /** Expunges are found by a snapshot but this session has none to compare it with (its first pass). */
  goneUnknown(path: string, tail: PassTail): boolean {
    return !!tail.snapshot && !this.#previousSnapshot(path, tail.status.uidvalidity, false);
  }

  /** The Worker acknowledged the tail: it is now the view later passes compare with. */
  relayed(path: string, tail: PassTail): void {
    if (tail.snapshot)
      this.#lastSnapshot.set(path, { uidvalidity: tail.status.uidvalidity, uids: Uint32Array.from(tail.snapshot) });
    if (tail.digests) this.#flagDigests.set(path, tail.digests);
  }

  /**
   * Mail relayed outside the folder's own pass (another folder's catch-up) joins the view its next
   * pass compares with: one that left again at once is then seen leaving, and announced as a hint
   * with what comes back (else its return would find the old place still held: a second email).
   */
  caughtUp(path: string, uidvalidity: number, uids: number[]): void {
    const last = this.#lastSnapshot.get(path);
    if (!last || last.uidvalidity !== uidvalidity || uids.length === 0) return;
    const merged = Uint32Array.from(new Set([...last.uids, ...uids]));
    this.#lastSnapshot.set(path, { uidvalidity, uids: merged.sort() });
  }

  #previousSnapshot(path: string, uidvalidity: number, reset: boolean): Uint32Array | undefined {
    const last = this.#lastSnapshot.get(path);
    return last && !reset && last.uidvalidity === uidvalidity ? last.uids : undefined;
  }

  /** Forgets a folder that is gone from the listing. */
  forget(path: string): void {
    this.#vanished.delete(path);
    this.#flagDigests.delete(path);
    this.#lastSnapshot.delete(path);
  }

  async #fetchFlags(client: ImapFlow, lastUid: number, extra: { changedSince?: bigint }): Promise<FlagUpdate[]> {
    const gmail = this.#features().gmail;
    const flags: FlagUpdate[] = [];
    for await (const msg of client.fetch(
      `1:${lastUid}`,
      { uid: true, flags: true, ...(gmail && { labels: true }) },
      { uid: true, ...extra },
    )) {
      if (hasUid(msg) && msg.uid <= lastUid) flags.push(toFlagUpdate(msg, gmail));
    }
    return flags;
  }

  /** Without CONDSTORE: every flag up to `lastUid`, keeping only the pages whose digest changed. */
  async #scanFlags(
    client: ImapFlow,
    path: string,
    lastUid: number,
    reset: boolean,
  ): Promise<{ flags: FlagUpdate[]; digests: Uint32Array }> {
    const known = reset ? undefined : this.#flagDigests.get(path);
    const gmail = this.#features().gmail;
    const changed: FlagUpdate[] = [];
    const digests: number[] = [];
    let page: FlagUpdate[] = [];
    const closePage = () => {
      const digest = digestOf(page);
      if (known?.[digests.length] !== digest) changed.push(...page);
      digests.push(digest);
      page = [];
    };
    for await (const msg of client.fetch(
      `1:${lastUid}`,
      { uid: true, flags: true, ...(gmail && { labels: true }) },
      { uid: true },
    )) {
      if (!hasUid(msg) || msg.uid > lastUid) continue;
      page.push(toFlagUpdate(msg, gmail));
      if (page.length >= this.#pageSize) closePage();
    }
    if (page.length) closePage();
    return { flags: changed, digests: Uint32Array.from(digests) };
  }
}

/** FNV-1a over the page's UIDs and flags (a changed flag or a shifted UID changes it). */
function digestOf(page: FlagUpdate[]): number {
  let hash = 0x811c9dc5;
  for (const update of page) {
    const text = `${update.uid}:${update.flags.join(' ')}:${update.labels?.join(' ') ?? ''};`;
    for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193) >>> 0;
  }
  return hash;
}

export async function uidsUpTo(client: ImapFlow, lastUid: number): Promise<number[]> {
  if (lastUid === 0) return [];
  const uids = await client.search({ uid: `1:${lastUid}` }, { uid: true });
  return (uids || []).filter((uid) => uid <= lastUid).sort((a, b) => a - b);
}
