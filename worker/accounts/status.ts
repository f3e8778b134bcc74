/**
 * What the API says of an account's connection: its `status` and `last_error` in D1, written with
 * the account.status.* event when they change, and the note left when a message is skipped.
 */
import type { AccountStatus } from '../../common/relay.ts';
import type { Env } from '../env.ts';
import { eventStatement, newEvent, type OutboxEvent } from '../events/outbox.ts';
import { isoNow } from '../lib/time.ts';
import { ACCOUNT_COLUMNS, presentAccount, type AccountRow } from './present.ts';
import { directoryDb } from '../shards/registry.ts';

/**
 * Writes the status the holder reported; returns the event to dispatch, or null when nothing
 * changed. A repeated "running" keeps what last_error says (a message skipped meanwhile stays visible).
 */
export async function writeAccountStatus(
  env: Env,
  accountId: string,
  status: AccountStatus,
  error: string | null,
): Promise<OutboxEvent | null> {
  const db = directoryDb(env);
  const row = await db
    .prepare(`SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE id = ?`)
    .bind(accountId)
    .first<AccountRow>();
  const lastError = status === 'running' ? null : error;
  if (!row || (row.status === status && (status === 'running' || row.last_error === lastError))) return null;
  const updated: AccountRow = { ...row, status, last_error: lastError };
  const event = newEvent(`account.status.${status}`, accountId, presentAccount(updated));
  await db.batch([
    db
      .prepare('UPDATE accounts SET status = ?, last_error = ?, updated_at = ? WHERE id = ?')
      .bind(status, lastError, isoNow(), accountId),
    eventStatement(db, event),
  ]);
  return event;
}

/** A message was given up on: the log and the account's last_error say which and why. */
export async function recordSkippedMessage(
  env: Env,
  accountId: string,
  where: { path: string; uid: number },
  reason: string,
): Promise<void> {
  const detail = `a message could not be stored and was skipped (folder ${where.path}, UID ${where.uid}): ${reason}`;
  console.error(`account ${accountId}: ${detail}`);
  await directoryDb(env)
    .prepare('UPDATE accounts SET last_error = ?, updated_at = ? WHERE id = ?')
    .bind(detail.slice(0, 1000), isoNow(), accountId)
    .run();
}
