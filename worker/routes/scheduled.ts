/** GET /emails/scheduled, GET and DELETE /emails/scheduled/{id}: scheduled sends (POST /emails with send_at). */
import { Hono } from 'hono';
import { z } from 'zod';
import { REMOVED_ACCOUNTS } from '../accounts/removed.ts';
import { accountObject } from '../durable/account-stub.ts';
import type { AppEnv, Env } from '../env.ts';
import { ApiError, notFound } from '../lib/errors.ts';
import { parseId } from '../lib/ids.ts';
import { cursorList, cursorPaging, decodeCursor } from '../lib/paging.ts';
import { anyCase, parseQuery } from '../lib/validation.ts';
import { loadScheduled, presentScheduled, SCHEDULED_STATUSES, type ScheduledRow } from '../send/scheduled.ts';
import { accountEnv, findInShards, keyOrder, mergePages, onListShards } from '../shards/spread.ts';

export const ScheduledListQuery = cursorPaging.extend({
  account_id: z.string().optional(),
  status: anyCase(SCHEDULED_STATUSES).optional(),
});

async function scheduledFromPath(env: Env, value: string) {
  const id = parseId('scheduled', value);
  const row = id ? await findInShards(env, (shard) => loadScheduled(shard.DB, id)) : null;
  if (!row) throw notFound('Scheduled email');
  return row;
}

export const scheduledEmails = new Hono<AppEnv>()
  .get('/', async (c) => {
    const q = parseQuery(c, ScheduledListQuery);
    const filters = `scheduled:account_id=${q.account_id ?? ''}&status=${q.status ?? ''}`;
    const where = [`account_id NOT IN (${REMOVED_ACCOUNTS})`];
    const params: (string | number)[] = [];
    if (q.account_id !== undefined) {
      where.push('account_id = ?');
      params.push(parseId('account', q.account_id) ?? '');
    }
    if (q.status !== undefined) {
      where.push('status = ?');
      params.push(q.status);
    }
    if (q.cursor !== undefined) {
      const [last] = decodeCursor(q.cursor, filters);
      where.push('id < ?');
      params.push(String(last));
    }
    const accountId = q.account_id === undefined ? undefined : parseId('account', q.account_id);
    const pages = await onListShards(c.env, accountId, async (env) => {
      const { results } = await env.DB.prepare(
        `SELECT * FROM scheduled_emails WHERE ${where.join(' AND ')} ORDER BY id DESC LIMIT ?`,
      )
        .bind(...params, q.limit + 1)
        .all<ScheduledRow>();
      return results;
    });
    const results = mergePages(
      pages,
      q.limit,
      keyOrder((row: ScheduledRow) => [row.id], [true]),
    );
    return c.json(cursorList('ScheduledEmails', results, q.limit, filters, (row) => [row.id], presentScheduled));
  })
  .get('/:scheduled_id', async (c) =>
    c.json(presentScheduled(await scheduledFromPath(c.env, c.req.param('scheduled_id')))),
  )
  .delete('/:scheduled_id', async (c) => {
    const row = await scheduledFromPath(c.env, c.req.param('scheduled_id'));
    // The account's object decides, against the send time: the cancel wins or the send does.
    const result = await accountObject(c.env, row.account_id).cancelSchedule(row.id);
    if (result.cancelled) return c.json({ object: 'ScheduledEmailCancelled' as const, id: row.id });
    const status =
      result.status ??
      (await loadScheduled((await accountEnv(c.env, row.account_id)).DB, row.id))?.status ??
      row.status;
    throw new ApiError(
      'already_exists',
      `This scheduled email can no longer be cancelled: its status is ${status === 'scheduled' ? 'sending' : status}.`,
    );
  });
