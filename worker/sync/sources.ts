/**
 * Reading a new message's source for parsing. A source the gateway staged (common/relay.ts
 * `MessageIn.staged`) is read from R2 only up to `PARSE_SOURCE_BYTES`: a larger one (a message of
 * 70 MB) is parsed from its head, so the object never holds it whole; its header, its bodies and the
 * attachments that end inside the head are listed, and the whole source stays the email's raw
 * source (`GET …/raw`). A message over the gateway's limit (`too_large`) comes with its header block
 * only: it is listed from it, without a body or a raw source, and the account's `last_error` says so.
 */
import type { MessageIn } from '../../common/relay.ts';
import { blobKeys } from '../emails/store.ts';
import { fromBase64 } from '../lib/crypto.ts';
import type { SyncState } from './state.ts';

/** The most of a staged source parsed: well within an object's 128 MB with the copies parsing makes. */
export const PARSE_SOURCE_BYTES = 16 * 1024 * 1024;

/** A source as read for parsing; `cut`: only its first `PARSE_SOURCE_BYTES` were read. */
export interface SourceBytes {
  raw: Uint8Array;
  cut: boolean;
}

/** The source of a message of the change (inline, or staged in R2 before the change). */
export async function sourceOf(state: SyncState, message: MessageIn): Promise<SourceBytes> {
  if (!message.staged) return { raw: fromBase64(message.raw), cut: false };
  const key = blobKeys.staged(state.account.accountId, message.staged);
  const object = await state.env.BLOBS.get(key, { range: { offset: 0, length: PARSE_SOURCE_BYTES } });
  if (!object) throw new Error(`the staged source ${message.staged} is missing`);
  return { raw: new Uint8Array(await object.arrayBuffer()), cut: object.size > PARSE_SOURCE_BYTES };
}

/** The account's `last_error` for a message over the gateway's limit. */
export function tooLargeNotice(path: string, message: MessageIn): string {
  return `a message of ${message.size} bytes in folder ${path} (UID ${message.uid}) is larger than the gateway takes: it is listed from its headers, without its body`;
}
