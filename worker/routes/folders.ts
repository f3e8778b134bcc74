import { Hono } from 'hono';
import { z } from 'zod';
import { REMOVED_ACCOUNTS } from '../accounts/removed.ts';
import type { AppEnv } from '../env.ts';
import { presentFolder, type FolderRow } from '../folders/present.ts';
import { notFound } from '../lib/errors.ts';
import { parseId } from '../lib/ids.ts';
import { parseQuery } from '../lib/validation.ts';
import { accountEnv } from '../shards/spread.ts';

export const FolderListQuery = z.object({ account_id: z.string({ error: 'is required' }) });

export async function listFolders(db: D1Database, accountId: string | null) {
  const { results } = accountId
    ? await db
        .prepare(
          `SELECT * FROM folders WHERE account_id = ? AND account_id NOT IN (${REMOVED_ACCOUNTS}) ORDER BY provider_id`,
        )
        .bind(accountId)
        .all<FolderRow>()
    : { results: [] as FolderRow[] };
  return { object: 'Folders', data: results.map(presentFolder) };
}

export async function getFolder(db: D1Database, rawAccountId: string | undefined, rawFolderId: string | undefined) {
  const accountId = parseId('account', rawAccountId);
  const folderId = parseId('folder', rawFolderId);
  const row =
    accountId && folderId
      ? await db
          .prepare(`SELECT * FROM folders WHERE id = ? AND account_id = ? AND account_id NOT IN (${REMOVED_ACCOUNTS})`)
          .bind(folderId, accountId)
          .first<FolderRow>()
      : null;
  if (!row) throw notFound('Folder');
  return presentFolder(row);
}

export const folders = new Hono<AppEnv>().get('/', async (c) => {
  const { account_id } = parseQuery(c, FolderListQuery);
  const accountId = parseId('account', account_id);
  return c.json(await listFolders(accountId ? (await accountEnv(c.env, accountId)).DB : c.env.DB, accountId));
});
