/**
 * Fetching and relaying a folder's new mail (every UID above the pass's baseline), in batches, a
 * few on their way to the Worker while the next is fetched (the Worker applies them in order).
 *
 * Sizes are read first (one FETCH of RFC822.SIZE, which also bounds what this pass fetches): a
 * message over the gateway's limit
 * (`GATEWAY_MAX_MESSAGE_BYTES`, also the IMAP literal limit of every connection) is never fetched
 * whole; it is relayed with the first bytes of its source only (its header block), marked
 * `omitted`, so it is listed from its headers and the mail after it goes on.
 *
 * A FETCH response without a source (the message was expunged while being read, or an unsolicited
 * flag update) is not a message to relay: such a UID is asked for once more after the loop, and
 * the cursor never goes back below what was already relayed.
 */
import type { FetchMessageObject, ImapFlow } from 'imapflow';
import { BATCHES_IN_FLIGHT, MAX_BATCH_BYTES, MAX_BATCH_MESSAGES } from '../common/relay-limits.ts';
import type { Change, FolderCursor, MessageIn } from '../common/relay.ts';
import type { FolderStatus } from './folder-changes.ts';
import type { Logger } from './log.ts';
import {
  hasSource,
  hasUid,
  MESSAGE_OVERHEAD_BYTES,
  messageQuery,
  OMITTED_HEAD_BYTES,
  toOmitted,
  toRelayed,
  type StageSource,
} from './messages.ts';
import type { ReadThrough } from './pass-tail.ts';

type Hint = { path: string; uidvalidity: number; uids: number[] };

/** What fetching new mail needs of its pass. */
export interface FetchHost {
  readonly log: Logger;
  readonly stage: StageSource;
  /** Messages larger than this many bytes are relayed without their body. */
  readonly maxMessageBytes: number;
  gmail(): boolean;
  /** Expunges still to be reported, sent with every batch of arrivals (`vanishing`). */
  hints(): Hint[];
  send(changes: Change[]): Promise<void>;
}

/** One FETCH of the pass: a UID range fetched whole, or one message too large for that. */
interface Span {
  start: number;
  end: number;
  omitted: boolean;
}

/**
 * The spans of `first..last`: ranges fetched whole around each message over the limit (`large`,
 * ascending). Always bounded: "n:*" names the highest UID even below n, which could be a message
 * over the limit (its literal would end the connection).
 */
export function spansOf(first: number, last: number, large: number[]): Span[] {
  const spans: Span[] = [];
  let start = first;
  for (const uid of large) {
    if (uid < start || uid > last) continue;
    if (uid > start) spans.push({ start, end: uid - 1, omitted: false });
    spans.push({ start: uid, end: uid, omitted: true });
    start = uid + 1;
  }
  if (start <= last) spans.push({ start, end: last, omitted: false });
  return spans;
}

/** The UIDs above `after` and their sizes (one FETCH of RFC822.SIZE): the highest, and those over `maxBytes`. */
async function sizesAbove(
  client: ImapFlow,
  after: number,
  maxBytes: number,
): Promise<{ last: number; large: number[] }> {
  const large: number[] = [];
  let last = after;
  for await (const msg of client.fetch(`${after + 1}:*`, { uid: true, size: true }, { uid: true })) {
    if (!hasUid(msg) || msg.uid <= after) continue;
    last = Math.max(last, msg.uid);
    if ((msg.size ?? 0) > maxBytes) large.push(msg.uid);
  }
  return { last, large: large.sort((a, b) => a - b) };
}

/** Batches relayed messages and keeps a few batches on their way; the last one carries the cursor. */
class Relay {
  #batch: MessageIn[] = [];
  #bytes = 0;
  #inFlight: Promise<void>[] = [];
  relayed = new Set<number>();
  readonly host: FetchHost;
  readonly path: string;
  readonly uidvalidity: number;

  constructor(host: FetchHost, path: string, uidvalidity: number) {
    this.host = host;
    this.path = path;
    this.uidvalidity = uidvalidity;
  }

  async add(message: MessageIn): Promise<void> {
    // A staged source is not in the change, but the Worker reads it back while applying it.
    const size = (message.staged ? message.size : message.raw.length) + MESSAGE_OVERHEAD_BYTES;
    if (this.#batch.length && (this.#batch.length >= MAX_BATCH_MESSAGES || this.#bytes + size > MAX_BATCH_BYTES))
      await this.flush(null);
    this.#batch.push(message);
    this.#bytes += size;
    this.relayed.add(message.uid);
  }

  /** Sends what is batched; `cursor`: the final batch, which waits for every batch on its way. */
  async flush(cursor: Change | null): Promise<void> {
    const { path, uidvalidity } = this;
    const changes: Change[] = [];
    const vanishing = this.host.hints();
    if (this.#batch.length)
      changes.push({
        type: 'messages',
        path,
        uidvalidity,
        messages: this.#batch,
        ...(vanishing.length && { vanishing }),
      });
    if (cursor) changes.push(cursor);
    this.#batch = [];
    this.#bytes = 0;
    if (this.#inFlight.length >= BATCHES_IN_FLIGHT) await this.#inFlight.shift();
    const sent = this.host.send(changes);
    sent.catch(() => undefined); // awaited below; a failure of the loop itself is the one to report
    this.#inFlight.push(sent);
    if (cursor) while (this.#inFlight.length) await this.#inFlight.shift();
  }
}

/** What fetchNew relayed: how far it read, and the UIDs it relayed (ascending). */
export interface NewMail extends ReadThrough {
  relayed: number[];
}

/**
 * Fetches and relays every message above the baseline's last UID. Returns the folder's last UID
 * (everything up to it has been relayed, or was expunged, or did not come after a second try),
 * whether everything the folder held was relayed, and the UIDs relayed.
 */
export async function fetchNew(
  host: FetchHost,
  client: ImapFlow,
  path: string,
  status: FolderStatus,
  base: FolderCursor,
): Promise<NewMail> {
  // STATUS (or EXAMINE) ran before this FETCH, whose view is at least as new (see statusOf):
  // every UID below its UIDNEXT is covered by it.
  let lastUid = Math.max(base.last_uid, status.uidnext - 1);
  // Nothing new by the folder's numbers; numbers that may be behind (STATUS of a selected folder) never skip the FETCH.
  if (status.exact && status.uidnext !== 0 && status.uidnext <= base.last_uid + 1)
    return { lastUid, complete: true, relayed: [] };
  const gmail = host.gmail();
  const relay = new Relay(host, path, status.uidvalidity);
  /** UIDs answered without their source (and not with it in another response of the same FETCH). */
  const sourceless = new Set<number>();
  const take = async (msg: FetchMessageObject, omitted: boolean) => {
    // "n:*" also matches the highest UID when it is below n.
    if (!hasUid(msg) || msg.uid <= base.last_uid || relay.relayed.has(msg.uid)) return;
    if (!hasSource(msg)) {
      sourceless.add(msg.uid);
      return;
    }
    sourceless.delete(msg.uid);
    await relay.add(omitted ? toOmitted(msg, gmail) : await toRelayed(msg, gmail, host.stage));
    lastUid = Math.max(lastUid, msg.uid);
  };
  // Mail that arrives after the sizes were read is fetched by the next pass (its notification or poll).
  const { last, large } = await sizesAbove(client, base.last_uid, host.maxMessageBytes);
  for (const span of spansOf(base.last_uid + 1, last, large)) {
    const range = `${span.start}:${span.end}`;
    const query = span.omitted
      ? { ...messageQuery(gmail), source: { start: 0, maxLength: OMITTED_HEAD_BYTES } }
      : messageQuery(gmail);
    for await (const msg of client.fetch(range, query, { uid: true })) await take(msg, span.omitted);
  }
  if (large.length)
    host.log.warn('messages over the size limit relayed without their body', { path, uids: large.join(',') });
  // Asked once more: a response without a source may have been an unsolicited flag update.
  if (sourceless.size) {
    const again = [...sourceless].sort((a, b) => a - b);
    for await (const msg of client.fetch(again.join(','), messageQuery(gmail), { uid: true })) await take(msg, false);
    if (sourceless.size)
      host.log.warn('messages fetched twice without their source', {
        path,
        uids: [...sourceless].slice(0, 20).join(','),
      });
  }
  if (relay.relayed.size)
    await relay.flush({
      type: 'cursor',
      path,
      uidvalidity: status.uidvalidity,
      last_uid: lastUid,
      highest_modseq: base.highest_modseq,
    });
  const relayed = [...relay.relayed].sort((a, b) => a - b);
  return { lastUid, complete: sourceless.size === 0, relayed };
}
