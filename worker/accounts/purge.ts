/** Removing an account's data: its D1 rows (in chunks, so no single statement grows with the mailbox) and its R2 blobs. */
import { blobKeys } from '../emails/store.ts';
import type { Env } from '../env.ts';

const CHUNK = 500;

export async function purgeAccountData(env: Env, accountId: string): Promise<void> {
  const db = env.DB;
  for (const table of ['email_participants', 'attachments', 'email_folders', 'email_search', 'thread_keys']) {
    for (;;) {
      const { meta } = await db
        .prepare(`DELETE FROM ${table} WHERE rowid IN (SELECT rowid FROM ${table} WHERE account_id = ? LIMIT ${CHUNK})`)
        .bind(accountId)
        .run();
      if (meta.changes < CHUNK) break;
    }
  }
  for (;;) {
    const { meta } = await db
      .prepare(`DELETE FROM emails WHERE id IN (SELECT id FROM emails WHERE account_id = ? LIMIT ${CHUNK})`)
      .bind(accountId)
      .run();
    if (meta.changes < CHUNK) break;
  }
  await db.batch([
    db.prepare('DELETE FROM contacts WHERE account_id = ?').bind(accountId),
    db.prepare('DELETE FROM folders WHERE account_id = ?').bind(accountId),
  ]);
  let cursor: string | undefined;
  do {
    const listing = await env.BLOBS.list({ prefix: blobKeys.accountPrefix(accountId), cursor, limit: 1000 });
    if (listing.objects.length) await env.BLOBS.delete(listing.objects.map((o) => o.key));
    cursor = listing.truncated ? listing.cursor : undefined;
  } while (cursor);
}
