import { Hono } from 'hono';
import { z } from 'zod';
import type { AppEnv } from '../env.ts';
import { AuthIntentBody, connectAccount } from '../accounts/connect.ts';
import { removeAccount } from '../accounts/remove.ts';
import { ACCOUNT_COLUMNS, presentAccount, type AccountRow } from '../accounts/present.ts';
import { notFound } from '../lib/errors.ts';
import { parseId } from '../lib/ids.ts';
import { offsetList, offsetPaging } from '../lib/paging.ts';
import { isoNow } from '../lib/time.ts';
import { parseJsonBody, parseQuery, singleLine } from '../lib/validation.ts';
import { AccountMetadata } from '../accounts/metadata.ts';

export async function loadAccount(db: D1Database, rawId: string | undefined): Promise<AccountRow> {
  const id = parseId('account', rawId);
  const row = id
    ? await db
        .prepare(`SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE id = ? AND removed_at_ms IS NULL`)
        .bind(id)
        .first<AccountRow>()
    : null;
  if (!row) throw notFound('Account');
  return row;
}

export const PatchAccountBody = z.strictObject({
  metadata: AccountMetadata.optional(),
  display_name: singleLine('display_name').pipe(z.string().max(200)).nullable().optional(),
});

export const authIntent = new Hono<AppEnv>().post('/intent', async (c) =>
  c.json(await connectAccount(c.env, await parseJsonBody(c, AuthIntentBody))),
);

export const accounts = new Hono<AppEnv>()
  .get('/', async (c) => {
    const { limit, offset } = parseQuery(c, offsetPaging);
    const { results } = await c.env.DB.prepare(
      `SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE removed_at_ms IS NULL ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`,
    )
      .bind(limit + 1, offset)
      .all<AccountRow>();
    return c.json(offsetList('Accounts', results.map(presentAccount), limit));
  })
  .get('/:id', async (c) => c.json(presentAccount(await loadAccount(c.env.DB, c.req.param('id')))))
  .patch('/:id', async (c) => {
    const row = await loadAccount(c.env.DB, c.req.param('id'));
    const body = await parseJsonBody(c, PatchAccountBody);
    const updated: AccountRow = {
      ...row,
      metadata_json: body.metadata === undefined ? row.metadata_json : JSON.stringify(body.metadata),
      display_name: body.display_name === undefined ? row.display_name : body.display_name,
    };
    await c.env.DB.prepare('UPDATE accounts SET metadata_json = ?, display_name = ?, updated_at = ? WHERE id = ?')
      .bind(updated.metadata_json, updated.display_name, isoNow(), row.id)
      .run();
    return c.json(presentAccount(updated));
  })
  .delete('/:id', async (c) => {
    const row = await loadAccount(c.env.DB, c.req.param('id'));
    await removeAccount(c.env, row.id);
    return c.json({ object: 'AccountDeleted', id: row.id });
  });
