/**
 * Emails left in no folder are deleted on evidence, not on a timer (common/relay.ts `OrphanState`).
 * The batch that removes an email's last membership marks it (`emails.orphaned_at_ms` holds the
 * batch's mark: a number that grows with every such batch, near the time in ms; see memberships.ts
 * `detach`); the arriving side of a move clears the mark. The gateway reports each pass that read a
 * folder through with the mark it had been told when the pass began (`passed`). Once every folder
 * has such a pass at or above an email's mark, the other side of a move would have been relayed:
 * the account's object deletes it, from D1 alone, in bounded steps on its change chain (so no sync
 * batch can re-file an email in between). A crash anywhere leaves the marks; the next evidence or
 * alarm finishes the job.
 */
import { countDownStatements } from '../contacts/counts.ts';
import { emailEventData } from '../emails/events.ts';
import type { EmailRow } from '../emails/present.ts';
import { loadEmailRecords } from '../emails/store.ts';
import type { Env } from '../env.ts';
import { eventStatement, newEvent, type OutboxEvent } from '../events/outbox.ts';
import { releaseBlobs, stagedKeys } from '../emails/blobs.ts';
import { deleteEmailRows } from '../emails/delete.ts';
import { rowExists } from '../lib/sql.ts';
import type { CursorState } from './state.ts';

/**
 * Emails deleted per step (one alarm): one D1 statement each (its event) plus a few set-based
 * statements and lookups, and one R2 call per 1,000 blobs: well inside one invocation's 1,000 D1
 * queries and 50 subrequests.
 */
export const ORPHAN_STEP = 200;

/**
 * How far the evidence reaches: every email marked up to this mark can be waiting for no folder,
 * because every folder the account has (as known from a listing that began after it left) has been
 * read through by a pass that began after it left. A folder never read (no UIDVALIDITY: \Noselect,
 * or STATUS failed) holds no mail to wait for.
 */
export function evidenceReach(cursors: Iterable<CursorState>, listedMark: number): number {
  let reach = listedMark;
  for (const cursor of cursors) if (cursor.uidvalidity > 0) reach = Math.min(reach, cursor.passed);
  return reach;
}

/** Whether the account has an email in no folder. */
export const hasOrphans = (env: Env, accountId: string): Promise<boolean> =>
  rowExists(env.DB, 'SELECT 1 FROM emails WHERE account_id = ? AND orphaned_at_ms IS NOT NULL LIMIT 1', accountId);

/**
 * Deletes up to one step of the account's orphans marked up to `reach` (email.delete or
 * email.draft.delete each, in the batch that deletes the emails). Returns the events written.
 */
export async function deleteOrphansUpTo(
  env: Env,
  accountId: string,
  reach: number,
  deferStaged: (keys: string[]) => void,
): Promise<OutboxEvent[]> {
  const db = env.DB;
  const { results } = await db
    .prepare(
      `SELECT * FROM emails WHERE account_id = ? AND orphaned_at_ms IS NOT NULL AND orphaned_at_ms <= ?
       AND NOT EXISTS (SELECT 1 FROM email_folders WHERE email_id = emails.id) LIMIT ${ORPHAN_STEP}`,
    )
    .bind(accountId, reach)
    .all<EmailRow>();
  if (results.length === 0) return [];
  const records = await loadEmailRecords(env, results);
  const events = records.map(({ row, ...rest }) =>
    newEvent(
      row.is_draft ? 'email.draft.delete' : 'email.delete',
      accountId,
      emailEventData({ row, ...rest }, undefined, { emailStays: false }),
    ),
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
