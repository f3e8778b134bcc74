import { Hono } from 'hono';
import type { AppEnv } from '../app.ts';
import { ACCOUNT_COLUMNS, presentAccount, type AccountRow } from '../accounts/present.ts';
import { notFound } from '../lib/errors.ts';
import { parseId } from '../lib/ids.ts';
import { offsetList, offsetPaging } from '../lib/paging.ts';
import { parseQuery } from '../lib/validation.ts';

export async function loadAccount(db: D1Database, rawId: string | undefined): Promise<AccountRow> {
  const id = parseId('account', rawId);
  const row = id
    ? await db.prepare(`SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE id = ?`).bind(id).first<AccountRow>()
    : null;
  if (!row) throw notFound('Account');
  return row;
}

export const accounts = new Hono<AppEnv>()
  .get('/', async (c) => {
    const { limit, offset } = parseQuery(c, offsetPaging);
    const { results } = await c.env.DB.prepare(
      `SELECT ${ACCOUNT_COLUMNS} FROM accounts ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`,
    )
      .bind(limit + 1, offset)
      .all<AccountRow>();
    return c.json(offsetList('Accounts', results.map(presentAccount), limit));
  })
  .get('/:id', async (c) => c.json(presentAccount(await loadAccount(c.env.DB, c.req.param('id')))));
