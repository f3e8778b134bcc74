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
 * The keys a snapshot's values are taken from when its data is made again (event-data.ts): those
 * written now (SNAPSHOT_WRITTEN) and those older snapshots also hold (subject, Message-ID and the
 * like, which never change, so the stored email gives the same).
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
 * What a snapshot keeps of its email: which email, and what may change after the event (thread,
 * folders, role, flags, the reply target's id). Everything else is read from the stored email.
 */
const SNAPSHOT_WRITTEN = ['id', 'thread_id', 'folder_ids', 'role', 'unread', 'starred', 'in_reply_to'] as const;

/**
 * The snapshot's JSON of an email's list variant. An email that answers none has `in_reply_to` null
 * for good (its Message-ID references never change): left out.
 */
export function snapshotJson(email: Record<string, unknown>): string {
  const kept: Record<string, unknown> = {};
  for (const key of SNAPSHOT_WRITTEN)
    if (key in email && !(key === 'in_reply_to' && email[key] === null)) kept[key] = email[key];
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
