/**
 * Emails left in no folder. The batch that removes an email's last membership marks it
 * (`emails.orphaned_at_ms`, see memberships.ts `detach`); the arriving side of a move clears the
 * mark. The account's object deletes marked emails whose short grace ran out, from D1 alone, in
 * bounded steps: a crash anywhere leaves the marks, and the next alarm finishes the job. The
 * object runs this on its change chain, so no sync batch can re-file an email in between.
 */
import { countDownStatements } from '../contacts/counts.ts';
import { emailEventData } from '../emails/events.ts';
import type { EmailRow } from '../emails/present.ts';
import { loadEmailRecords } from '../emails/store.ts';
import type { Env } from '../env.ts';
import { eventStatement, newEvent, type OutboxEvent } from '../events/outbox.ts';
import { blobInUse } from './commit.ts';

/**
 * An email expunged from its last folder waits this long for the other side of a move to arrive.
 * The gateway reports a move's arrival before its expunge; the grace covers what it cannot order
 * (a restart between the two, a destination it could not read yet).
 */
export const ORPHAN_GRACE_MS = 10_000;

/** Emails deleted per step: about 10 D1 statements each, well inside one invocation's limits. */
const STEP = 50;

/** When the next orphan of the account is due, or null when there is none. */
export async function nextOrphanDue(env: Env, accountId: string): Promise<number | null> {
  const row = await env.DB.prepare(
    'SELECT MIN(orphaned_at_ms) AS at FROM emails WHERE account_id = ? AND orphaned_at_ms IS NOT NULL',
  )
    .bind(accountId)
    .first<{ at: number | null }>();
  return row?.at == null ? null : row.at + ORPHAN_GRACE_MS;
}

/**
 * Deletes up to one step of the account's due orphans (email.delete or email.draft.delete each, in
 * the batch that deletes the email). Returns the events written.
 */
export async function deleteDueOrphans(env: Env, accountId: string, now: number): Promise<OutboxEvent[]> {
  const db = env.DB;
  const { results } = await db
    .prepare(
      `SELECT * FROM emails WHERE account_id = ? AND orphaned_at_ms IS NOT NULL AND orphaned_at_ms <= ?
       AND NOT EXISTS (SELECT 1 FROM email_folders WHERE email_id = emails.id) LIMIT ${STEP}`,
    )
    .bind(accountId, now - ORPHAN_GRACE_MS)
    .all<EmailRow>();
  const events: OutboxEvent[] = [];
  for (const record of await loadEmailRecords(env, results)) {
    const { row } = record;
    const event = newEvent(row.is_draft ? 'email.draft.delete' : 'email.delete', accountId, emailEventData(record));
    await db.batch([
      ...countDownStatements(db, accountId, row.id),
      // Its search index row goes with its email_search row (trigger).
      db.prepare('DELETE FROM email_search WHERE email_id = ?').bind(row.id),
      db.prepare('DELETE FROM thread_keys WHERE email_id = ?').bind(row.id),
      db.prepare('DELETE FROM email_participants WHERE email_id = ?').bind(row.id),
      db.prepare('DELETE FROM attachments WHERE email_id = ?').bind(row.id),
      db.prepare('DELETE FROM emails WHERE id = ?').bind(row.id),
      eventStatement(db, event),
    ]);
    events.push(event);
    // A staged source may be the raw source of an identical copy too.
    const raw = row.raw_key && !(await blobInUse(env, row.raw_key, row.id)) ? row.raw_key : null;
    const keys = [raw, row.body_key, ...record.attachments.map((a) => a.blob_key)].filter((k): k is string => !!k);
    if (keys.length) await env.BLOBS.delete(keys);
  }
  return events;
}
