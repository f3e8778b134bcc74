/** What the gateway fetches of a message and how it becomes a relayed `MessageIn`: shared by the live sync and the initial sync. */
import type { FetchMessageObject, FetchQueryObject } from 'imapflow';
import { createHash } from 'node:crypto';
import type { FlagUpdate, MessageIn } from '../common/relay.ts';
import { STAGE_SOURCE_BYTES } from '../common/relay-limits.ts';

/** JSON overhead of one message besides its base64 source, for the batch size estimate. */
export const MESSAGE_OVERHEAD_BYTES = 512;

/** FETCH items of a relayed message; on Gmail also X-GM-LABELS, X-GM-MSGID and X-GM-THRID. */
export function messageQuery(gmail: boolean): FetchQueryObject {
  return {
    uid: true,
    flags: true,
    internalDate: true,
    size: true,
    source: true,
    ...(gmail && { labels: true, emailId: true, threadId: true }),
  };
}

/**
 * Whether a FETCH response is one of the messages asked for. A server may interleave unsolicited
 * FETCH responses (another client's flag change) that carry no UID: those are not ours to relay.
 */
export const hasUid = (msg: Pick<FetchMessageObject, 'uid'>): boolean => typeof msg.uid === 'number' && msg.uid > 0;

/** Message flags without \Recent: a per-session flag that says nothing about the message. */
function flagsOf(msg: FetchMessageObject): string[] {
  return [...(msg.flags ?? [])].filter((flag) => flag !== '\\Recent').sort();
}

/** INTERNALDATE as a Date (now when the server gave none or garbage). */
export function internalDateOf(msg: Pick<FetchMessageObject, 'internalDate'>): Date {
  const date = msg.internalDate instanceof Date ? msg.internalDate : new Date(msg.internalDate ?? Date.now());
  return Number.isNaN(date.getTime()) ? new Date() : date;
}

export function toMessageIn(msg: FetchMessageObject, gmail: boolean): MessageIn {
  return {
    uid: msg.uid,
    flags: flagsOf(msg),
    ...(gmail && {
      labels: [...(msg.labels ?? [])],
      ...(msg.emailId !== undefined && { gm_msgid: String(msg.emailId) }),
      ...(msg.threadId !== undefined && { gm_thrid: String(msg.threadId) }),
    }),
    internal_date: internalDateOf(msg).toISOString(),
    size: msg.size ?? msg.source?.length ?? 0,
    raw: (msg.source ?? Buffer.alloc(0)).toString('base64'),
  };
}

/**
 * Whether a FETCH response carries the message's source. A server may leave BODY[] out (or answer it
 * oddly) for a message expunged while it was being read: such a response is never relayed as a
 * message (it would become an empty email, or a source the Worker cannot decode).
 */
export function hasSource(msg: FetchMessageObject): msg is FetchMessageObject & { source: Buffer } {
  return Buffer.isBuffer(msg.source);
}

/** Stores a large source with the Worker under its SHA-256 before the change that names it. */
export type StageSource = (sha256: string, source: Buffer) => Promise<void>;

/** A fetched message as relayed: small sources inline (base64), large ones staged first. */
export async function toRelayed(msg: FetchMessageObject, gmail: boolean, stage: StageSource): Promise<MessageIn> {
  const source = msg.source;
  if (!source || source.length <= STAGE_SOURCE_BYTES) return toMessageIn(msg, gmail);
  const sha256 = createHash('sha256').update(source).digest('hex');
  await stage(sha256, source);
  return {
    ...toMessageIn({ ...msg, source: Buffer.alloc(0) }, gmail),
    size: msg.size ?? source.length,
    staged: sha256,
  };
}

/** Bytes of a message over the size limit that are fetched: enough for any real header block. */
export const OMITTED_HEAD_BYTES = 256 * 1024;

/** The header block of a (partial) source: up to the first empty line, or all of it when none came. */
function headerBlock(source: Buffer): Buffer {
  const end = source.indexOf('\r\n\r\n');
  if (end >= 0) return source.subarray(0, end + 4);
  const bare = source.indexOf('\n\n');
  return bare >= 0 ? source.subarray(0, bare + 2) : source;
}

/** A message over the size limit, fetched partially: relayed with its header block only (`too_large`). */
export function toOmitted(msg: FetchMessageObject & { source: Buffer }, gmail: boolean): MessageIn {
  return {
    ...toMessageIn({ ...msg, source: headerBlock(msg.source) }, gmail),
    size: msg.size ?? 0,
    too_large: true,
  };
}

export function toFlagUpdate(msg: FetchMessageObject, gmail: boolean): FlagUpdate {
  return { uid: msg.uid, flags: flagsOf(msg), ...(gmail && { labels: [...(msg.labels ?? [])].sort() }) };
}
