/**
 * Folder management on the server (the Worker's `folder` request): CREATE, RENAME and DELETE, with
 * the STATUS of the folder where it now is, so the Worker can record it before the next listing.
 * imapflow encodes non-ASCII names as modified UTF-7 on the wire.
 */
import type { ImapFlow } from 'imapflow';
import type { FolderAction, FolderActionResult } from '../common/relay.ts';
import { GatewayError } from './errors.ts';

/** RFC 5530 response codes of a refused CREATE or RENAME that mean "that name is taken". */
const NAME_TAKEN = new Set(['ALREADYEXISTS']);

export async function runFolderAction(client: ImapFlow, action: FolderAction): Promise<FolderActionResult> {
  try {
    switch (action.type) {
      case 'create': {
        const created = await client.mailboxCreate(action.path);
        if (created && created.created === false) throw taken(action.path);
        const path = created?.path ?? action.path;
        return { path, status: await statusOf(client, path) };
      }
      case 'rename': {
        const renamed = await client.mailboxRename(action.path, action.new_path);
        const path = renamed?.newPath ?? action.new_path;
        return { path, status: await statusOf(client, path) };
      }
      case 'delete':
        await client.mailboxDelete(action.path);
        return { path: null, status: null };
    }
  } catch (err) {
    const code = (err as { serverResponseCode?: string }).serverResponseCode;
    if (code && NAME_TAKEN.has(code.toUpperCase()))
      throw taken(action.type === 'rename' ? action.new_path : action.path);
    throw err;
  }
}

function taken(path: string): GatewayError {
  return new GatewayError('already_exists', `the server already has a folder named ${path}`);
}

/** STATUS of a folder; null when the server would not say (the next listing reads it). */
async function statusOf(client: ImapFlow, path: string): Promise<FolderActionResult['status']> {
  try {
    const status = await client.status(path, { uidValidity: true, uidNext: true, messages: true });
    if (!status) return null;
    return {
      uidvalidity: Number(status.uidValidity ?? 0),
      uidnext: status.uidNext ?? 0,
      messages: status.messages ?? 0,
    };
  } catch {
    return null;
  }
}
