/**
 * Folder management: POST /{account_id}/folders, PUT and DELETE /{account_id}/folders/{folder_id}.
 * Each runs through the account's object and the gateway (commands/folders.ts); the folder keeps its
 * `fld_` id through a rename, and its event is sent once.
 */
import { Hono, type Context } from 'hono';
import { NOT_REMOVED } from '../accounts/removed.ts';
import { unwrap, type CommandAnswer } from '../commands/holder.ts';
import type { FolderRequest } from '../commands/folders.ts';
import { accountObject } from '../durable/account-stub.ts';
import type { AppEnv } from '../env.ts';
import { ApiError, notFound } from '../lib/errors.ts';
import { parseId } from '../lib/ids.ts';
import { parseJsonBody } from '../lib/validation.ts';
import { CreateFolderBody, UpdateFolderBody } from '../schemas/folders.ts';

async function accountFromPath(c: Context<AppEnv>): Promise<string> {
  const accountId = parseId('account', c.req.param('account_id'));
  const row = accountId
    ? await c.env.DB.prepare(`SELECT id FROM accounts WHERE id = ? AND ${NOT_REMOVED}`).bind(accountId).first()
    : null;
  if (!row || !accountId) throw notFound('Account');
  return accountId;
}

function folderFromPath(c: Context<AppEnv>): string {
  const folderId = parseId('folder', c.req.param('folder_id'));
  if (!folderId) throw notFound('Folder');
  return folderId;
}

/** A parent given as something other than a folder id names no folder: 404 like an unknown one. */
function parentFrom(value: string | null | undefined): string | null | undefined {
  if (value === null || value === undefined) return value;
  const id = parseId('folder', value);
  if (!id) throw notFound(`Folder ${value} (parent_id)`);
  return id;
}

/** The server refusing the name (a NO) is the request's fault: 400 with the server's reason. */
function folderAnswer<T>(answer: CommandAnswer<T>): T {
  if (!answer.ok && answer.kind === 'provider_rejected') throw new ApiError('invalid_parameters', answer.detail);
  return unwrap(answer);
}

async function manage(c: Context<AppEnv>, accountId: string, request: FolderRequest) {
  return folderAnswer(await accountObject(c.env, accountId).manageFolder(request));
}

export const folderActions = new Hono<AppEnv>()
  .post('/:account_id/folders', async (c) => {
    const accountId = await accountFromPath(c);
    const body = await parseJsonBody(c, CreateFolderBody);
    const parent_id = parentFrom(body.parent_id) ?? null;
    return c.json(await manage(c, accountId, { type: 'create', name: body.name, parent_id }), 201);
  })
  .put('/:account_id/folders/:folder_id', async (c) => {
    const accountId = await accountFromPath(c);
    const folder_id = folderFromPath(c);
    const body = await parseJsonBody(c, UpdateFolderBody);
    const request: FolderRequest = {
      type: 'update',
      folder_id,
      name: body.name,
      parent_id: parentFrom(body.parent_id),
    };
    return c.json(await manage(c, accountId, request));
  })
  .delete('/:account_id/folders/:folder_id', async (c) => {
    const accountId = await accountFromPath(c);
    const id = folderFromPath(c);
    await manage(c, accountId, { type: 'delete', folder_id: id });
    return c.json({ object: 'FolderDeleted' as const, id });
  });
