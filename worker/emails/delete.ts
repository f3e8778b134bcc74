/**
 * Deleting emails' rows, set-based: each statement takes the ids as one bound JSON array (expanded
 * with json_each), so a step deleting hundreds of emails is a handful of statements, each led by an
 * index on the email id (see test/worker/bulk-limits.test.ts for the query plans).
 */

/** The numbers of the emails (?: their ids as a JSON array); null for emails stored before numbers. */
const NUMBERS = 'SELECT num FROM emails WHERE id IN (SELECT value FROM json_each(?)) AND num IS NOT NULL';

/** Rows that belong to an email, then the emails themselves; every table is searched by email id or number. */
export const DELETE_EMAIL_ROWS_SQL = [
  // Rows by the emails' numbers, while the emails are there to give them.
  `DELETE FROM emails_fts WHERE rowid IN (${NUMBERS})`,
  `DELETE FROM participants WHERE num IN (${NUMBERS})`,
  `DELETE FROM thread_key_numbers WHERE num IN (${NUMBERS})`,
  // Emails stored before numbers: the search index row goes with its email_search row (trigger).
  'DELETE FROM email_search WHERE email_id IN (SELECT value FROM json_each(?))',
  'DELETE FROM thread_key_hashes WHERE email_id IN (SELECT value FROM json_each(?))',
  'DELETE FROM thread_keys WHERE email_id IN (SELECT value FROM json_each(?))',
  'DELETE FROM email_participants WHERE email_id IN (SELECT value FROM json_each(?))',
  'DELETE FROM attachments WHERE email_id IN (SELECT value FROM json_each(?))',
  'DELETE FROM email_folders WHERE email_id IN (SELECT value FROM json_each(?))',
  'DELETE FROM folder_departures WHERE email_id IN (SELECT value FROM json_each(?))',
  'DELETE FROM emails WHERE id IN (SELECT value FROM json_each(?))',
] as const;

export function deleteEmailRows(db: D1Database, emailIds: string[]): D1PreparedStatement[] {
  if (emailIds.length === 0) return [];
  const ids = JSON.stringify(emailIds);
  return DELETE_EMAIL_ROWS_SQL.map((sql) => db.prepare(sql).bind(ids));
}

/** R2 deletes take at most this many keys per call. */
const R2_DELETE_MAX = 1000;

/** Deletes R2 objects in as few calls as the API allows. */
export async function deleteBlobs(blobs: R2Bucket, keys: string[]): Promise<void> {
  for (let i = 0; i < keys.length; i += R2_DELETE_MAX) await blobs.delete(keys.slice(i, i + R2_DELETE_MAX));
}
