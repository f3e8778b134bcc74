/**
 * Mailbox actions on one email: POST /{account_id}/emails/{id}/unread and /read, PUT /emails/{id}
 * (unread, starred, folders) and DELETE /emails/{id} (to Trash). Each runs through the account's
 * object and the gateway, keeps the email id and produces email.update.
 */
import { Hono, type Context } from 'hono';
import { z } from 'zod';
import type { AppEnv } from '../env.ts';
import { unwrap } from '../commands/holder.ts';
import type { ModifyWanted } from '../commands/modify.ts';
import { ROLES } from '../schemas/folders.ts';
import { notFound } from '../lib/errors.ts';
import { parseId } from '../lib/ids.ts';
import { parseJsonBody } from '../lib/validation.ts';
import { emailFromPath } from './emails.ts';
import { accountObject } from '../durable/account-stub.ts';
import { accountEnv } from '../shards/spread.ts';

export const ModifyBody = z.strictObject({
  unread: z.boolean().optional().meta({ description: 'true: mark unread; false: mark read (on every copy).' }),
  starred: z.boolean().optional().meta({ description: 'true: flag (IMAP) or star (Gmail); false: remove it.' }),
  folders: z
    .array(z.string().min(1, 'must not be empty'))
    .min(1, 'give at least one folder (fld_…, a role name or a provider path)')
    .max(50)
    .optional()
    .meta({
      description:
        'The complete new folder set: `fld_…` ids, role names (any case) or provider paths (`Junk`, `Work/2024`), like the `folder` filter.',
    }),
});

/**
 * Folder ids, provider paths and role names of the account (as the `folder` filter takes them), as
 * folder ids; 404 for one that does not exist. An exact path wins over a role of the same name.
 */
async function resolveFolders(c: Context<AppEnv>, accountId: string, names: string[]): Promise<string[]> {
  const { results } = await (await accountEnv(c.env, accountId)).DB.prepare(
    'SELECT id, role, provider_id FROM folders WHERE account_id = ? ORDER BY provider_id',
  )
    .bind(accountId)
    .all<{ id: string; role: string; provider_id: string }>();
  const ids = names.map((name) => {
    const upper = name.toUpperCase();
    const folder = parseId('folder', name)
      ? results.find((f) => f.id === name)
      : (results.find((f) => f.provider_id === name) ??
        ((ROLES as readonly string[]).includes(upper) && upper !== 'UNKNOWN'
          ? results.find((f) => f.role === upper)
          : undefined));
    if (!folder) throw notFound(`Folder ${name}`);
    return folder.id;
  });
  return [...new Set(ids)];
}

async function modify(
  c: Context<AppEnv>,
  accountParam: string | undefined,
  wanted: (accountId: string) => Promise<ModifyWanted>,
) {
  const { row } = await emailFromPath(c, accountParam, { headers: false });
  const stub = accountObject(c.env, row.account_id);
  return unwrap(await stub.modifyEmail(row.id, await wanted(row.account_id)));
}

export const emailActions = new Hono<AppEnv>()
  .put('/:email_id', async (c) => {
    const body = await parseJsonBody(c, ModifyBody);
    return c.json(
      await modify(c, undefined, async (accountId) => ({
        unread: body.unread,
        starred: body.starred,
        folder_ids: body.folders ? await resolveFolders(c, accountId, body.folders) : undefined,
      })),
    );
  })
  .delete('/:email_id', async (c) => {
    const email = await modify(c, undefined, async (accountId) => ({
      folder_ids: await resolveFolders(c, accountId, ['TRASH']),
    }));
    return c.json({ object: 'EmailDeleted' as const, id: email.id });
  });

export const accountEmailActions = new Hono<AppEnv>()
  .post('/:account_id/emails/:email_id/unread', async (c) =>
    c.json(await modify(c, c.req.param('account_id'), async () => ({ unread: true }))),
  )
  .post('/:account_id/emails/:email_id/read', async (c) =>
    c.json(await modify(c, c.req.param('account_id'), async () => ({ unread: false }))),
  );
