/** GET /{account_id}/emails/{email_id}/thread: the email's conversation, oldest first, drafts left out. */
import type { Context } from 'hono';
import { z } from 'zod';
import type { AppEnv } from '../env.ts';
import { presentEmailSingle, type EmailRow } from '../emails/present.ts';
import { loadEmailRecords } from '../emails/store.ts';
import { limitParam } from '../lib/paging.ts';
import { parseQuery } from '../lib/validation.ts';
import { accountEnv } from '../shards/spread.ts';
import { emailFromPath } from './emails.ts';

export const ThreadQuery = z.object({ limit: limitParam });

export async function getThread(c: Context<AppEnv>, accountParam: string) {
  const email = await emailFromPath(c, accountParam, { headers: false });
  const { limit } = parseQuery(c, ThreadQuery);
  const db = (await accountEnv(c.env, email.row.account_id)).DB;
  const { results: rows } = await db
    .prepare(
      'SELECT * FROM emails WHERE thread_id = ? AND account_id = ? AND is_draft = 0 ORDER BY date_ms, id LIMIT ?',
    )
    .bind(email.row.thread_id, email.row.account_id, limit + 1)
    .all<EmailRow>();
  // The emails whose R2 reads (large bodies, header blocks) one request makes (emails/source-headers.ts);
  // has_more tells of the rest.
  const records = await loadEmailRecords(c.env, rows.slice(0, limit), { headers: true, withinReads: true });
  return {
    object: 'Thread' as const,
    id: email.row.thread_id,
    data: records.map(presentEmailSingle),
    has_more: rows.length > records.length,
  };
}
