/** Account-scoped forms of the paths: /{account_id}/folders/{id}, /{account_id}/emails/{id}(/thread). Mounted last. */
import { Hono } from 'hono';
import type { AppEnv } from '../env.ts';
import { presentEmailSingle } from '../emails/present.ts';
import { emailFromPath } from './emails.ts';
import { getFolder } from './folders.ts';
import { getThread } from './threads.ts';
import { parseId } from '../lib/ids.ts';
import { accountEnv } from '../shards/spread.ts';

export const accountScoped = new Hono<AppEnv>()
  .get('/:account_id/folders/:folder_id', async (c) => {
    const accountId = parseId('account', c.req.param('account_id'));
    const db = accountId ? (await accountEnv(c.env, accountId)).DB : c.env.DB;
    return c.json(await getFolder(db, c.req.param('account_id'), c.req.param('folder_id')));
  })
  .get('/:account_id/emails/:email_id', async (c) =>
    c.json(presentEmailSingle(await emailFromPath(c, c.req.param('account_id')))),
  )
  .get('/:account_id/emails/:email_id/thread', async (c) => c.json(await getThread(c, c.req.param('account_id'))));
