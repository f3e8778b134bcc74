/** Account-scoped forms of the paths: /{account_id}/folders/{id}, /{account_id}/emails/{id}(/thread). Mounted last. */
import { Hono } from 'hono';
import type { AppEnv } from '../env.ts';
import { presentEmailSingle } from '../emails/present.ts';
import { emailFromPath } from './emails.ts';
import { getFolder } from './folders.ts';
import { getThread } from './threads.ts';

export const accountScoped = new Hono<AppEnv>()
  .get('/:account_id/folders/:folder_id', async (c) =>
    c.json(await getFolder(c.env.DB, c.req.param('account_id'), c.req.param('folder_id'))),
  )
  .get('/:account_id/emails/:email_id', async (c) =>
    c.json(presentEmailSingle(await emailFromPath(c, c.req.param('account_id')))),
  )
  .get('/:account_id/emails/:email_id/thread', async (c) => c.json(await getThread(c, c.req.param('account_id'))));
