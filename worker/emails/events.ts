/**
 * The `data` of email events: the list variant. Bodies are dropped (with `body_truncated: true`)
 * when the payload would exceed 64 KB (DECISIONS.md): here, so outbox rows stay small, and again by
 * the webhook sender, which measures the whole envelope.
 *
 * The outbox row keeps a snapshot of the email instead of a copy (event-data.ts makes the data again).
 */
import { rememberDataJson } from '../events/outbox.ts';
import { presentEmailList, type EmailRecord } from './present.ts';

export const MAX_EVENT_PAYLOAD_BYTES = 64 * 1024;

/** The same data without `body` and `body_plain`, marked `body_truncated`. Other data is returned as is. */
export function withoutBodies(data: unknown): unknown {
  if (typeof data !== 'object' || data === null || !('body' in data || 'body_plain' in data)) return data;
  const { body: _html, body_plain: _plain, ...rest } = data as Record<string, unknown>;
  return { ...rest, body_truncated: true };
}

/**
 * What an event keeps of its email: what may change later (thread, folders, role, flags, the reply
 * target's id), and what its readers look it up by (id, subject, Message-ID, provider id, origin).
 */
export const SNAPSHOT_KEYS = [
  'object',
  'id',
  'draft_id',
  'message_id',
  'origin',
  'thread_id',
  'subject',
  'provider_id',
  'attachments',
  'folders',
  'folder_ids',
  'role',
  'unread',
  'starred',
  'in_reply_to',
] as const;

/**
 * Left out of the snapshot when written, though older snapshots hold them: `folders` (the same
 * list as `folder_ids`) and `attachments` (an email's attachments never change; read with the email).
 */
const SNAPSHOT_DERIVED: ReadonlySet<string> = new Set(['folders', 'attachments']);

/** The snapshot's JSON of an email's list variant. */
export function snapshotJson(email: Record<string, unknown>): string {
  const kept: Record<string, unknown> = {};
  for (const key of SNAPSHOT_KEYS) if (key in email && !SNAPSHOT_DERIVED.has(key)) kept[key] = email[key];
  return JSON.stringify({ ...kept, body: null });
}

/**
 * `emailStays`: false for an event written as its email is deleted (email.delete): its row keeps
 * the whole email, as nothing else will.
 */
export function emailEventData(
  record: EmailRecord,
  bodies?: { html: string; plain: string },
  { emailStays = true }: { emailStays?: boolean } = {},
) {
  // The bodies as parsed, over what the record's content holds (its headers and addressing).
  const email = presentEmailList(
    bodies ? { ...record, bodies: { ...record.bodies, html: bodies.html, plain: bodies.plain } } : record,
  );
  const json = JSON.stringify(email);
  // A UTF-16 unit is at most 3 UTF-8 bytes: most payloads need no encoding to be measured.
  if (json.length * 3 > MAX_EVENT_PAYLOAD_BYTES && new TextEncoder().encode(json).length > MAX_EVENT_PAYLOAD_BYTES)
    return withoutBodies(email);
  rememberDataJson(email, emailStays ? snapshotJson(email as Record<string, unknown>) : json);
  return email;
}
