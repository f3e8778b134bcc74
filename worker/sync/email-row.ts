/**
 * A new email's D1 row and attachment rows, and the R2 objects that go with them. Bodies and the
 * addressing are one compressed BLOB (`content`, emails/content.ts); the header block is read from
 * the raw source when it can be, and is in the BLOB otherwise. Whatever a message holds, its row
 * stays far below D1's row limit (measured in UTF-8 bytes): large bodies and large header blocks
 * go to R2 (`body_key`), and the few fields that could still grow without bound (subject,
 * references, address lists) are cut to sizes no real message reaches.
 */
import { sha256Hex } from '../../common/crypto.ts';
import type { MessageIn } from '../../common/relay.ts';
import { packContent } from '../emails/content.ts';
import type { AttachmentRow, EmailRow, StoredAddress, StoredAddressing, StoredBodies } from '../emails/present.ts';
import { blobKeys } from '../emails/store.ts';
import type { FolderRow } from '../folders/present.ts';
import { sourceHeaders } from '../ingest/headers.ts';
import { textToHtml } from '../ingest/html.ts';
import { normalizeAddress } from '../ingest/parse.ts';
import type { ParsedAddress, ParsedMessage } from '../ingest/types.ts';
import { newId } from '../lib/ids.ts';
import type { FlagState } from './memberships.ts';
import type { BlobWriter } from './segment.ts';

/** Bodies larger than this many UTF-8 bytes (HTML + text) go to R2; the row keeps a pointer. */
const INLINE_BODY_MAX_BYTES = 256 * 1024;
/** A header block larger than this (as JSON, UTF-8 bytes) goes to R2 too. */
const INLINE_HEADERS_MAX_BYTES = 64 * 1024;
/** Characters of a subject kept (RFC 5322 allows 998 per line; folded subjects longer than this are abuse). */
const SUBJECT_MAX_CHARS = 16 * 1024;
/** Addresses kept per list, references kept (the most recent ones: what threading needs). */
const ADDRESSES_MAX = 1_000;
const REFERENCES_MAX = 200;

const utf8 = new TextEncoder();
/** UTF-8 length, measured only when it could matter (a UTF-16 unit is at most 3 bytes). */
const utf8Over = (text: string, max: number): boolean => text.length * 3 > max && utf8.encode(text).byteLength > max;

const stored = (a: ParsedAddress): StoredAddress => ({ address: a.address, name: a.name ?? '' });
const storedList = (list: ParsedAddress[]): StoredAddress[] => list.slice(0, ADDRESSES_MAX).map(stored);

/** Who a message is from and to, and what it references, as its content keeps them. */
const addressingOf = (mail: ParsedMessage): StoredAddressing => ({
  from: mail.from ? stored(mail.from) : null,
  to: storedList(mail.to),
  cc: storedList(mail.cc),
  bcc: storedList(mail.bcc),
  reply_to: storedList(mail.reply_to),
  references: mail.references.slice(-REFERENCES_MAX),
});

/** ASCII case folding, as SQLite's lower() does it. */
const asciiLower = (text: string): string => text.replace(/[A-Z]+/g, (upper) => upper.toLowerCase());

/** The subject case-folded for the subject filter, or '' when SQLite's lower() folds it the same (emails/query.ts). */
const foldedSubject = (subject: string): string => {
  const folded = subject.toLowerCase();
  return folded === asciiLower(subject) ? '' : folded;
};

/**
 * Whether the header block reads back from the raw source's first `header_length` bytes as the very
 * same headers (emails/source-headers.ts): then the row keeps only that length, and the block is stored once,
 * in the source. Checked here rather than assumed, so a source whose start parses otherwise on its
 * own (line ends judged from more than its header block) keeps its headers in the row.
 */
function headersReadableFromSource(raw: Uint8Array, mail: ParsedMessage, headersJson: string): boolean {
  // A longer block (or a source without a blank line, all "header") is kept whole in R2 as before.
  if (mail.headers.length === 0 || mail.header_length > Math.min(raw.length, INLINE_HEADERS_MAX_BYTES)) return false;
  return JSON.stringify(sourceHeaders(raw.subarray(0, mail.header_length))) === headersJson;
}

export interface NewEmail {
  mail: ParsedMessage;
  message: MessageIn;
  identity: string;
  folder: FolderRow;
  flags: FlagState;
  threadId: string;
  accountId: string;
  now: string;
}

/** What an email's R2 keys are derived from: its identity, so a retried change rewrites the same objects. */
const blobDigest = async (accountId: string, identity: string): Promise<string> =>
  (await sha256Hex(`${accountId}\n${identity}`)).slice(0, 40);

/**
 * The row of a new email, and its content as the row's `content` BLOB holds it (what reading it
 * back gives); its bytes go to `blobs` (a segment, or objects of their own).
 */
export async function buildEmailRow(
  e: NewEmail,
  raw: Uint8Array,
  blobs: BlobWriter,
): Promise<{ row: EmailRow; content: StoredBodies }> {
  const { mail, message, accountId } = e;
  const digest = blobs.ownKeys ? await blobDigest(accountId, e.identity) : '';
  const dateMs = mail.date_ms ?? (Date.parse(message.internal_date) || Date.now());
  const isDraft = e.flags.draft || e.folder.role === 'DRAFTS';

  // A staged source already is in R2: it becomes the raw source as it is (no second copy of a large message).
  // A message over the gateway's limit came without its body: it has no raw source (sync/sources.ts).
  const rawKey = message.too_large
    ? null
    : message.staged
      ? blobKeys.staged(accountId, message.staged)
      : blobs.put(blobKeys.raw(accountId, digest), raw, 'message/rfc822');
  const headersJson = JSON.stringify(mail.headers);
  const headersInSource = rawKey !== null && headersReadableFromSource(raw, mail, headersJson);
  const bodiesOutside = utf8Over(mail.html + mail.plain, INLINE_BODY_MAX_BYTES);
  const headersOutside = !headersInSource && utf8Over(headersJson, INLINE_HEADERS_MAX_BYTES);
  let bodyKey: string | null = null;
  if (bodiesOutside || headersOutside) {
    const outside: StoredBodies = {
      ...(bodiesOutside && { html: mail.html, plain: mail.plain }),
      ...(headersOutside && { headers: mail.headers }),
    };
    bodyKey = blobs.put(blobKeys.bodies(accountId, digest), JSON.stringify(outside), 'application/json');
  }
  const subject = mail.subject.slice(0, SUBJECT_MAX_CHARS);
  // A text-only email's HTML is its text escaped: not stored twice (emails/present.ts makes it again).
  const html = mail.html === textToHtml(mail.plain) ? {} : { html: mail.html };
  const content: StoredBodies = {
    ...(!bodiesOutside && { ...html, plain: mail.plain }),
    ...(headersInSource ? { header_length: mail.header_length } : !headersOutside && { headers: mail.headers }),
    addressing: addressingOf(mail),
  };

  const row: EmailRow = {
    id: newId('email', dateMs > 0 ? Math.min(dateMs, Date.now()) : Date.now()),
    account_id: accountId,
    identity: e.identity,
    thread_id: e.threadId,
    provider_id: message.gm_msgid ?? null,
    message_id: mail.message_id,
    in_reply_to: mail.in_reply_to,
    references_json: '[]',
    // Made from date_ms on reading (emails/present.ts).
    date: '',
    date_ms: dateMs,
    subject,
    subject_folded: foldedSubject(subject),
    // The snippet is made again from the text body when the row holds it (emails/present.ts).
    snippet: bodiesOutside ? mail.snippet : '',
    // In `content` (addressing).
    from_json: null,
    to_json: '[]',
    cc_json: '[]',
    bcc_json: '[]',
    reply_to_json: '[]',
    from_address: mail.from ? normalizeAddress(mail.from.address) : null,
    body_html: null,
    body_plain: null,
    body_key: bodyKey,
    headers_json: '[]',
    content: await packContent(content),
    raw_key: rawKey,
    size: message.size,
    has_attachments: mail.has_attachments ? 1 : 0,
    unread: e.flags.unread ? 1 : 0,
    starred: e.flags.starred ? 1 : 0,
    is_draft: isDraft ? 1 : 0,
    role: e.folder.role,
    origin: 'external',
    tracking_id: null,
    draft_id: isDraft ? newId('draft') : null,
    created_at: e.now,
    // Set when the row changes after it is written (thread merges, actions).
    updated_at: '',
  };
  return { row, content };
}

/** Attachment rows of a new email; each attachment's bytes go to `blobs`. */
export async function attachmentRows(row: EmailRow, mail: ParsedMessage, blobs: BlobWriter): Promise<AttachmentRow[]> {
  const digest = mail.attachments.length && blobs.ownKeys ? await blobDigest(row.account_id, row.identity) : '';
  return mail.attachments.map((a, index) => {
    const key = blobs.put(
      blobKeys.attachment(row.account_id, digest, index),
      a.content,
      a.mime || 'application/octet-stream',
    );
    return {
      id: newId('attachment'),
      email_id: row.id,
      account_id: row.account_id,
      name: a.filename,
      extension: a.extension,
      size: a.size,
      mime: a.mime,
      cid: a.cid,
      inline: a.inline ? 1 : 0,
      blob_key: key,
    };
  });
}
