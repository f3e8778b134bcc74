/**
 * Scheduled sends as the API shows them (table `scheduled_emails`): what POST /emails with `send_at`
 * writes, what GET /emails/scheduled lists and what the account's object updates as the send moves
 * on. Whether a send goes or is cancelled is decided by the account's object alone
 * (durable/schedules.ts); this table follows its decisions.
 */
import { z } from 'zod';
import { REMOVED_ACCOUNTS } from '../accounts/removed.ts';
import { invalid } from '../lib/errors.ts';

export const SCHEDULED_STATUSES = ['scheduled', 'sending', 'sent', 'failed', 'cancelled'] as const;
export type ScheduledStatus = (typeof SCHEDULED_STATUSES)[number];

/** `send_at` must be at least this far ahead… */
export const SEND_AT_MIN_MS = 5_000;
/** …and at most this far. */
export const SEND_AT_MAX_MS = 30 * 24 * 3600_000;
/** An ended schedule is listed for this long, then deleted by the sweep. */
export const SCHEDULE_RETENTION_MS = 30 * 24 * 3600_000;

export const SendAt = z
  .string()
  .meta({ format: 'date-time', description: 'When to send: ISO 8601, at least 5 s and at most 30 days ahead.' });

/** `send_at` as epoch ms, or a 400 naming the field. */
export function parseSendAt(value: string, now: number = Date.now()): number {
  const ms = /^\d{4}-\d{2}-\d{2}T/.test(value) ? Date.parse(value) : Number.NaN;
  if (Number.isNaN(ms)) throw invalid('send_at: must be an ISO 8601 timestamp such as 2030-01-01T09:00:00Z');
  if (ms < now + SEND_AT_MIN_MS) throw invalid('send_at: must be at least 5 seconds in the future');
  if (ms > now + SEND_AT_MAX_MS) throw invalid('send_at: must be at most 30 days in the future');
  return ms;
}

export interface ScheduledRow {
  id: string;
  account_id: string;
  send_at: string;
  created_at: string;
  message_id: string;
  subject: string | null;
  to_json: string;
  status: ScheduledStatus;
  error: string | null;
}

export function presentScheduled(row: ScheduledRow) {
  return {
    object: 'ScheduledEmail' as const,
    id: row.id,
    account_id: row.account_id,
    send_at: row.send_at,
    created_at: row.created_at,
    message_id: row.message_id,
    subject: row.subject,
    to: JSON.parse(row.to_json) as unknown[],
    status: row.status,
    error: row.error,
  };
}

export function insertScheduled(db: D1Database, row: ScheduledRow): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO scheduled_emails (id, account_id, send_at, created_at, message_id, subject, to_json, status, error)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    )
    .bind(
      row.id,
      row.account_id,
      row.send_at,
      row.created_at,
      row.message_id,
      row.subject,
      row.to_json,
      row.status,
      row.error,
    );
}

const ENDED: readonly ScheduledStatus[] = ['sent', 'failed', 'cancelled'];

/** The object's decision, mirrored for the API; an ended one starts its retention. */
export async function setScheduledStatus(
  db: D1Database,
  ids: string[],
  status: ScheduledStatus,
  error: string | null = null,
): Promise<void> {
  if (!ids.length) return;
  const endedAt = ENDED.includes(status) ? Date.now() : null;
  await db
    .prepare(
      'UPDATE scheduled_emails SET status = ?, error = ?, ended_at_ms = ? WHERE id IN (SELECT value FROM json_each(?))',
    )
    .bind(status, error, endedAt, JSON.stringify(ids))
    .run();
}

/**
 * A scheduled send whose outcome was unknown (its outgoing record was still pending) learns it from
 * the gateway's late report: `sent`, or `failed` with what the server said.
 */
export async function settleUnknownSchedule(
  db: D1Database,
  accountId: string,
  messageId: string,
  sent: boolean,
  detail: string | null,
): Promise<void> {
  await db
    .prepare(
      `UPDATE scheduled_emails SET status = ?, error = ?, ended_at_ms = coalesce(ended_at_ms, ?)
       WHERE account_id = ? AND message_id = ? AND status IN ('sending', 'failed')`,
    )
    .bind(sent ? 'sent' : 'failed', sent ? null : detail, Date.now(), accountId, messageId)
    .run();
}

export async function loadScheduled(db: D1Database, id: string): Promise<ScheduledRow | null> {
  return db
    .prepare(`SELECT * FROM scheduled_emails WHERE id = ? AND account_id NOT IN (${REMOVED_ACCOUNTS})`)
    .bind(id)
    .first<ScheduledRow>();
}

/** The retention sweep: ended schedules older than 30 days, a bounded chunk at a time. */
export function expiredScheduledCleanup(db: D1Database, now: number, limit: number): D1PreparedStatement {
  return db
    .prepare(
      'DELETE FROM scheduled_emails WHERE rowid IN (SELECT rowid FROM scheduled_emails WHERE ended_at_ms < ? LIMIT ?)',
    )
    .bind(now - SCHEDULE_RETENTION_MS, limit);
}
