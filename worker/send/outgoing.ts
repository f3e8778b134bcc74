/**
 * Records of the messages this API sent or saved as drafts (table `outgoing_messages`), keyed by
 * Message-ID. Written before the gateway is asked to send, read by the sync when the copy arrives.
 */
import { chunks, placeholders } from '../lib/sql.ts';

/** `pending` while the gateway has it without having answered; `sent`; `failed` (nothing went out). */
export type OutgoingOutcome = 'pending' | 'sent' | 'failed';

export interface OutgoingRecord {
  account_id: string;
  message_id: string;
  kind: 'send' | 'draft';
  tracking_id: string | null;
  tracking_label: string | null;
  draft_id: string | null;
  created_at: string;
}

export async function recordOutgoing(db: D1Database, record: OutgoingRecord): Promise<void> {
  await db
    .prepare(
      `INSERT INTO outgoing_messages (account_id, message_id, kind, tracking_id, tracking_label, draft_id, created_at, outcome)
       VALUES (?, ?, ?, ?, ?, ?, ?, 'pending')`,
    )
    .bind(
      record.account_id,
      record.message_id,
      record.kind,
      record.tracking_id,
      record.tracking_label,
      record.draft_id,
      record.created_at,
    )
    .run();
}

/** The outcome of a pending message, once known (the gateway's answer, or its later report). */
export async function settleOutgoing(
  db: D1Database,
  accountId: string,
  messageId: string,
  outcome: Exclude<OutgoingOutcome, 'pending'>,
  detail: string | null = null,
): Promise<boolean> {
  const result = await db
    .prepare(
      "UPDATE outgoing_messages SET outcome = ?, outcome_detail = ? WHERE account_id = ? AND message_id = ? AND outcome = 'pending'",
    )
    .bind(outcome, detail, accountId, messageId)
    .run();
  return result.meta.changes > 0;
}

/** A send that failed never reaches a mailbox: forget it. */
export async function forgetOutgoing(db: D1Database, accountId: string, messageId: string): Promise<void> {
  await db
    .prepare('DELETE FROM outgoing_messages WHERE account_id = ? AND message_id = ?')
    .bind(accountId, messageId)
    .run();
}

/** The account's outgoing records among these Message-IDs. */
export async function outgoingByMessageId(
  db: D1Database,
  accountId: string,
  messageIds: string[],
): Promise<Map<string, OutgoingRecord>> {
  const out = new Map<string, OutgoingRecord>();
  for (const part of chunks([...new Set(messageIds)])) {
    const { results } = await db
      .prepare(`SELECT * FROM outgoing_messages WHERE account_id = ? AND message_id IN (${placeholders(part.length)})`)
      .bind(accountId, ...part)
      .all<OutgoingRecord>();
    for (const r of results) out.set(r.message_id, r);
  }
  return out;
}

export async function outgoingByTrackingId(db: D1Database, trackingId: string): Promise<OutgoingRecord | null> {
  return db.prepare('SELECT * FROM outgoing_messages WHERE tracking_id = ?').bind(trackingId).first<OutgoingRecord>();
}

/** What a synced copy of an outgoing message takes from its record: origin api, its tracking id and draft id. */
export function outgoingFields(row: { is_draft: number; draft_id: string | null }, record: OutgoingRecord | undefined) {
  if (!record) return {};
  return {
    origin: 'api',
    tracking_id: record.tracking_id,
    draft_id: row.is_draft ? (record.draft_id ?? row.draft_id) : null,
  };
}

/** R2 key of a composed message waiting for the gateway to fetch it (deleted once the gateway answered). */
export const outgoingBlobPrefix = (accountId: string) => `outgoing/${accountId}/`;
export const outgoingBlobKey = (accountId: string, name: string) => `${outgoingBlobPrefix(accountId)}${name}.json`;
export const OUTGOING_NAME = /^[a-z0-9]{20,64}$/;
