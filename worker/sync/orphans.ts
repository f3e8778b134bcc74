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
import { releaseBlobs, stagedKeys } from '../emails/blobs.ts';
import { deleteEmailRows } from '../emails/delete.ts';

/**
 * An email expunged from its last folder waits this long for the other side of a move to arrive.
 * The gateway reports a move's arrival before its expunge; the grace covers what it cannot order
 * (a restart between the two, a destination it could not read yet).
 */
export const ORPHAN_GRACE_MS = 10_000;

/**
 * Emails deleted per step (one alarm): one D1 statement each (its event) plus a few set-based
 * statements and lookups, and one R2 call per 1,000 blobs: well inside one invocation's 1,000 D1
 * queries and 50 subrequests.
 */
export const ORPHAN_STEP = 200;

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
 * the batch that deletes the emails). Returns the events written.
 */
export async function deleteDueOrphans(
  env: Env,
  accountId: string,
  now: number,
  deferStaged: (keys: string[]) => void,
): Promise<OutboxEvent[]> {
  const db = env.DB;
  const { results } = await db
    .prepare(
      `SELECT * FROM emails WHERE account_id = ? AND orphaned_at_ms IS NOT NULL AND orphaned_at_ms <= ?
       AND NOT EXISTS (SELECT 1 FROM email_folders WHERE email_id = emails.id) LIMIT ${ORPHAN_STEP}`,
    )
    .bind(accountId, now - ORPHAN_GRACE_MS)
    .all<EmailRow>();
  if (results.length === 0) return [];
  const records = await loadEmailRecords(env, results);
  const events = records.map(({ row, ...rest }) =>
    newEvent(row.is_draft ? 'email.draft.delete' : 'email.delete', accountId, emailEventData({ row, ...rest })),
  );
  const ids = results.map((r) => r.id);
  const refs = records.flatMap(({ row, attachments }) => [
    row.raw_key,
    row.body_key,
    ...attachments.map((a) => a.blob_key),
  ]);
  // Before the batch: a crash after it still leaves the staged sources to be checked and deleted.
  deferStaged(stagedKeys(refs));
  await db.batch([
    ...countDownStatements(db, accountId, ids),
    ...deleteEmailRows(db, ids),
    ...events.map((event) => eventStatement(db, event)),
  ]);
  // A segment may hold other emails' bytes too: it stays while one uses it.
  await releaseBlobs(env, refs);
  return events;
}
