/**
 * Removing an account's data, in bounded steps: the account's object runs one step per alarm until
 * nothing is left (durable/account-object.ts). A step deletes up to PURGE_EMAILS emails with their
 * rows (set-based, by email id), then the account's other rows in chunks (its events with their
 * delivery log, its idempotency records and tracking hits included), then its R2 objects a listing
 * page at a time. What stays is the account.remove event written with the row's deletion. Each step stays far inside one invocation's 1,000 D1 queries and 50
 * subrequests, and every statement is led by an index (test/worker/bulk-limits.test.ts).
 */
import { deleteBlobs, deleteEmailRows } from '../emails/delete.ts';
import { eventStatement, newEvent, type OutboxEvent } from '../events/outbox.ts';
import { blobKeys } from '../emails/store.ts';
import type { Env } from '../env.ts';
import { outgoingBlobPrefix } from '../send/outgoing.ts';
import { directoryDb } from '../shards/registry.ts';
import { ACCOUNT_COLUMNS, presentAccount, type AccountRow } from './present.ts';

export const PURGE_EMAILS = 1000;
const PURGE_ROWS = 1000;
/** R2 listing pages per step: a list and a delete call each. */
const PURGE_BLOB_PAGES = 10;

/** The account's emails, a step at a time (index emails_by_account). */
export const PURGE_EMAIL_IDS_SQL = `SELECT id FROM emails WHERE account_id = ? LIMIT ${PURGE_EMAILS}`;

/** A chunk of the account's outgoing records: the tracking hits of exactly these go with them. */
const OUTGOING_CHUNK = `SELECT rowid FROM outgoing_messages WHERE account_id = ? LIMIT ${PURGE_ROWS}`;
/** A chunk of the account's events: their delivery log goes with them (a waiting call is dropped so). */
const EVENTS_CHUNK = `SELECT rowid FROM events WHERE account_id = ? LIMIT ${PURGE_ROWS}`;

/**
 * What is left once the emails are gone, each a chunk at a time by an index led by account_id (or
 * by the same chunk's keys), in one batch: a statement naming a chunk runs before the one deleting it.
 */
export const PURGE_ACCOUNT_ROWS_SQL = [
  `DELETE FROM contacts WHERE (account_id, identifier) IN
     (SELECT account_id, identifier FROM contacts WHERE account_id = ? LIMIT ${PURGE_ROWS})`,
  `DELETE FROM thread_keys WHERE (account_id, key, email_id) IN
     (SELECT account_id, key, email_id FROM thread_keys WHERE account_id = ? LIMIT ${PURGE_ROWS})`,
  `DELETE FROM email_search WHERE rowid IN (SELECT rowid FROM email_search WHERE account_id = ? LIMIT ${PURGE_ROWS})`,
  // Its participant rows went with its emails.
  'DELETE FROM account_numbers WHERE account_id = ?',
  `DELETE FROM tracking_hits WHERE tracking_id IN (SELECT tracking_id FROM outgoing_messages WHERE rowid IN (${OUTGOING_CHUNK}))`,
  `DELETE FROM outgoing_messages WHERE rowid IN (${OUTGOING_CHUNK})`,
  // An event has a delivery per endpoint: its deliveries go a chunk of rows at a time, and an event
  // only once none of its deliveries is left.
  `DELETE FROM webhook_conversations WHERE rowid IN (SELECT c.rowid FROM webhook_conversations c
     WHERE c.event_id IN (SELECT id FROM events WHERE rowid IN (${EVENTS_CHUNK})) LIMIT ${PURGE_ROWS})`,
  `DELETE FROM events WHERE rowid IN (${EVENTS_CHUNK})
     AND NOT EXISTS (SELECT 1 FROM webhook_conversations c WHERE c.event_id = events.id)`,
  `DELETE FROM folders WHERE rowid IN (SELECT rowid FROM folders WHERE account_id = ? LIMIT ${PURGE_ROWS})`,
  `DELETE FROM scheduled_emails WHERE rowid IN (SELECT rowid FROM scheduled_emails WHERE account_id = ? LIMIT ${PURGE_ROWS})`,
] as const;

/** The account's rows in the directory (DB) besides its row: a chunk per step, like the above. */
export const PURGE_DIRECTORY_ROWS_SQL = [
  `DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM idempotency_keys WHERE account_id = ? LIMIT ${PURGE_ROWS})`,
] as const;

/**
 * One step of the purge; true once nothing of the account is left but its `accounts` row. `env` is
 * the account's view (its DB the account's shard, shards/registry.ts).
 */
export async function purgeStep(env: Env, accountId: string): Promise<boolean> {
  const db = env.DB;
  const directory = directoryDb(env);
  const { results } = await db.prepare(PURGE_EMAIL_IDS_SQL).bind(accountId).all<{ id: string }>();
  if (results.length > 0) {
    await db.batch(
      deleteEmailRows(
        db,
        results.map((r) => r.id),
      ),
    );
    return false;
  }
  const deleted = [
    ...(await db.batch(PURGE_ACCOUNT_ROWS_SQL.map((sql) => db.prepare(sql).bind(accountId)))),
    ...(await directory.batch(PURGE_DIRECTORY_ROWS_SQL.map((sql) => directory.prepare(sql).bind(accountId)))),
  ];
  if (deleted.some((r) => r.meta.changes >= PURGE_ROWS)) return false;

  // Every object of the account lives under its prefix (segments, raw sources, bodies, attachments,
  // staged sources), or under the outgoing prefix (composed messages a send left behind).
  let pages = 0;
  for (const prefix of [blobKeys.accountPrefix(accountId), outgoingBlobPrefix(accountId)]) {
    for (;;) {
      if (pages++ === PURGE_BLOB_PAGES) return false;
      const listing = await env.BLOBS.list({ prefix, limit: 1000 });
      await deleteBlobs(
        env.BLOBS,
        listing.objects.map((o) => o.key),
      );
      if (!listing.truncated) break;
    }
  }
  return true;
}

/**
 * The last step once `purgeStep` left nothing but the row: the row goes with its account.remove
 * event, in one batch. Returns the event to dispatch, or null when the row was already gone.
 */
export async function deleteAccountRow(env: Env, accountId: string): Promise<OutboxEvent | null> {
  // The shard's mark of the account goes first: the directory row is what says a purge is unfinished.
  if (env.DIRECTORY) await env.DB.prepare('DELETE FROM accounts WHERE id = ?').bind(accountId).run();
  const db = directoryDb(env);
  const row = await db
    .prepare(`SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE id = ?`)
    .bind(accountId)
    .first<AccountRow>();
  if (!row) return null;
  const event = newEvent('account.remove', accountId, presentAccount(row));
  await db.batch([db.prepare('DELETE FROM accounts WHERE id = ?').bind(accountId), eventStatement(db, event)]);
  return event;
}
