/**
 * The Email object in its two variants (spec: Email): the list variant (emails list, drafts list,
 * webhook payloads) and the single variant (single-email get, thread). Both are built from an
 * `EmailRecord`: the emails row plus its folder ids and attachment rows.
 */
import type { z } from 'zod';
import type {
  Attendee as AttendeeSchema,
  Email,
  EmailListItem,
  TypedAttendee as TypedSchema,
} from '../schemas/emails.ts';
import { snippetOf, textToHtml } from '../ingest/html.ts';
import { iso } from '../lib/time.ts';
import type { Role } from '../schemas/folders.ts';

type Attendee = z.output<typeof AttendeeSchema>;
type TypedAttendee = z.output<typeof TypedSchema>;

export interface EmailRow {
  id: string;
  account_id: string;
  identity: string;
  thread_id: string;
  provider_id: string | null;
  message_id: string | null;
  in_reply_to: string | null;
  references_json: string;
  date: string;
  date_ms: number;
  subject: string;
  /**
   * `subject` lower-cased (Unicode-aware), for the case-insensitive subject filter; '' when SQLite's
   * lower() gives the same (ASCII-only case differences).
   */
  subject_folded: string;
  /** '' in rows whose text body is in `content` or `body_plain`: the snippet is made from it. */
  snippet: string;
  from_json: string | null;
  to_json: string;
  cc_json: string;
  bcc_json: string;
  reply_to_json: string;
  from_address: string | null;
  /**
   * Rows written before `content` existed: the HTML body (null when it is the text body as HTML, made
   * again on reading), the text body and the header block. Null and '[]' in rows with `content`.
   */
  body_html: string | null;
  body_plain: string | null;
  /** R2 key of what is too large for the row (large bodies, large header blocks). */
  body_key: string | null;
  headers_json: string;
  /** Bodies and headers the row holds, compressed (emails/content.ts); null in older rows. */
  content?: StoredBlob | null;
  raw_key: string | null;
  size: number;
  has_attachments: number;
  unread: number;
  starred: number;
  is_draft: number;
  role: string;
  origin: string;
  tracking_id: string | null;
  draft_id: string | null;
  created_at: string;
  updated_at: string;
  /** Set while the email is in no folder (sync/orphans.ts); absent on rows not read from D1. */
  orphaned_at_ms?: number | null;
}

/** D1 gives a BLOB back as an ArrayBuffer or as an array of byte values; written, it is a Uint8Array. */
export type StoredBlob = ArrayBuffer | Uint8Array | number[];

export interface AttachmentRow {
  id: string;
  email_id: string;
  account_id: string;
  name: string;
  extension: string;
  size: number;
  mime: string;
  cid: string | null;
  inline: number;
  blob_key: string;
}

export interface StoredAddress {
  address: string;
  name: string;
}

/** The parts of an email kept out of the row's text columns: in R2 at `body_key` (too large for the row), or in `content`. */
export interface StoredBodies {
  html?: string;
  plain?: string;
  headers?: { name: string; value: string }[];
  /**
   * Instead of `headers`: the header block is the raw source's first `header_length` bytes, read
   * from there only when the headers are presented (emails/source-headers.ts).
   */
  header_length?: number;
  /** Always in `content` since it holds them; rows written before have them in their JSON columns. */
  addressing?: StoredAddressing;
}

/** Who an email is from and to, and the Message-IDs it references. */
export interface StoredAddressing {
  from: StoredAddress | null;
  to: StoredAddress[];
  cc: StoredAddress[];
  bcc: StoredAddress[];
  reply_to: StoredAddress[];
  references: string[];
}

/** The email's addressing, from its content or, in rows written before, from the row's JSON columns. */
export function addressingOf(rec: { row: EmailRow; bodies?: StoredBodies }): StoredAddressing {
  if (rec.bodies?.addressing) return rec.bodies.addressing;
  const { row } = rec;
  const list = (json: string) => JSON.parse(json) as StoredAddress[];
  return {
    from: row.from_json ? (JSON.parse(row.from_json) as StoredAddress) : null,
    to: list(row.to_json),
    cc: list(row.cc_json),
    bcc: list(row.bcc_json),
    reply_to: list(row.reply_to_json),
    references: JSON.parse(row.references_json) as string[],
  };
}

/** The email's headers: from its content, the raw source (read when loaded with headers) or R2, or the row's column. */
function headersOf(rec: EmailRecord): { name: string; value: string }[] {
  if (rec.bodies?.headers) return rec.bodies.headers;
  if (rec.bodies?.header_length !== undefined)
    throw new Error(`email ${rec.row.id} was loaded without its headers (they are read from its raw source)`);
  return JSON.parse(rec.row.headers_json) as { name: string; value: string }[];
}

export interface EmailRecord {
  row: EmailRow;
  folder_ids: string[];
  attachments: AttachmentRow[];
  /** What the row's text columns do not hold: from `content` and R2 (large bodies, large header blocks). */
  bodies?: StoredBodies;
  /** Id of the email this one answers, when it is in the same account. */
  in_reply_to_id: string | null;
}

function attendee(a: StoredAddress, withType: true): TypedAttendee;
function attendee(a: StoredAddress, withType: false): Attendee;
function attendee(a: StoredAddress, withType: boolean): Attendee | TypedAttendee {
  return withType
    ? { identifier: a.address, display_name: a.name, identifier_type: 'EMAIL_ADDRESS' }
    : { identifier: a.address, display_name: a.name };
}

function attendees<W extends boolean>(list: StoredAddress[], withType: W) {
  return list.map((a) => attendee(a, withType as never)) as (W extends true ? TypedAttendee : Attendee)[];
}

function presentAttachment(a: AttachmentRow) {
  return {
    id: a.id,
    name: a.name,
    extension: a.extension,
    size: a.size,
    mime: a.mime,
    cid: a.cid ?? '',
    inline: a.inline === 1,
  };
}

/** An email's HTML body: a text-only email's is made from its text, as parsing made it (ingest/parse.ts). */
export function emailHtml(rec: { row: Pick<EmailRow, 'body_html' | 'body_plain'>; bodies?: StoredBodies }): string {
  const html = rec.bodies?.html ?? rec.row.body_html;
  return html ?? textToHtml(rec.bodies?.plain ?? rec.row.body_plain ?? '');
}

/** The email's date: rows written since it is made from `date_ms` keep '' (sync/email-row.ts). */
export const emailDate = (row: Pick<EmailRow, 'date' | 'date_ms'>): string => row.date || iso(row.date_ms);

/** Fields both variants share (`addressing`: the email's, read once by the caller). */
function common<W extends boolean>(rec: EmailRecord, addressing: StoredAddressing, withType: W) {
  const { row } = rec;
  const from = addressing.from ?? { address: '', name: '' };
  return {
    id: row.id,
    account_id: row.account_id,
    thread_id: row.thread_id,
    date: emailDate(row),
    subject: row.subject,
    body: emailHtml(rec),
    body_plain: rec.bodies?.plain ?? row.body_plain ?? '',
    from_attendee: attendee(from, withType as never) as W extends true ? TypedAttendee : Attendee,
    to_attendees: attendees(addressing.to, withType),
    cc_attendees: attendees(addressing.cc, withType),
    bcc_attendees: attendees(addressing.bcc, withType),
    reply_to_attendees: attendees(addressing.reply_to, withType),
    has_attachments: row.has_attachments === 1,
    attachments: rec.attachments.map(presentAttachment),
    folders: rec.folder_ids,
    origin: row.origin as 'api' | 'external',
    tracking_id: row.tracking_id,
  };
}

export function presentEmailList(rec: EmailRecord, options: { includeHeaders?: boolean } = {}): EmailListItem {
  const { row } = rec;
  const isDraft = row.is_draft === 1;
  const addressing = addressingOf(rec);
  return {
    object: isDraft ? ('Draft' as const) : ('Email' as const),
    ...common(rec, addressing, false),
    ...(isDraft ? { draft_id: row.draft_id } : {}),
    // Null when the provider gives none (IMAP); Gmail's X-GM-MSGID otherwise.
    provider_id: row.provider_id || null,
    message_id: row.message_id ?? '',
    snippet: row.snippet || snippetOf(rec.bodies?.plain ?? row.body_plain ?? ''),
    in_reply_to: row.in_reply_to ? { message_id: row.in_reply_to, id: rec.in_reply_to_id } : null,
    references: addressing.references,
    folder_ids: rec.folder_ids,
    role: row.role as Role,
    unread: row.unread === 1,
    starred: row.starred === 1,
    size: row.size,
    ...(options.includeHeaders ? { headers: headersOf(rec) } : {}),
  };
}

export function presentEmailSingle(rec: EmailRecord): Email {
  const { row } = rec;
  return {
    object: 'Email' as const,
    ...common(rec, addressingOf(rec), true),
    ...(row.is_draft === 1 ? { draft_id: row.draft_id } : {}),
    headers: headersOf(rec),
    is_unread: row.unread === 1,
    is_complete: true,
  };
}
