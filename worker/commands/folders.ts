/**
 * Folder management through the API: create, rename or move, delete. Planned from the folders D1
 * knows (rules: names, parents, roles, taken names), carried out by the gateway, then recorded on
 * the change chain with its one event, so the sync's next listing finds the folder where it now is
 * (same `fld_` id, same cursor, same memberships) and has nothing to report. Each record step is
 * idempotent: when the sync's listing was first, it finds the change made and adds no event.
 */
import type { Change, FolderAction, FolderActionResult } from '../../common/relay.ts';
import type { Env } from '../env.ts';
import { folderName, parentPath, presentFolder, type FolderRow } from '../folders/present.ts';
import { ApiError, notFound } from '../lib/errors.ts';
import { newId } from '../lib/ids.ts';
import { isoNow } from '../lib/time.ts';
import { deleteFolder, moveFolder } from '../sync/folders.ts';
import { addEvent, emptyResult, type ChangeResult, type SyncState } from '../sync/state.ts';
import type { Folder } from '../schemas/folders.ts';

/** What the client asked for (ids already checked for their prefix by the route). */
export type FolderRequest =
  | { type: 'create'; name: string; parent_id: string | null }
  | { type: 'update'; folder_id: string; name?: string; parent_id?: string | null }
  | { type: 'delete'; folder_id: string };

export interface FolderPlan {
  /** Null: nothing to do on the server (a rename to the name it has). */
  action: FolderAction | null;
  folder: FolderRow | null;
  /** The hierarchy delimiter of the folder's (new) path. */
  delimiter: string | null;
}

const MAX_NAME_LENGTH = 255;

/** Checks the request against the account's folders; every refusal leaves the server untouched. */
export async function planFolderAction(env: Env, accountId: string, request: FolderRequest): Promise<FolderPlan> {
  const { results: folders } = await env.DB.prepare('SELECT * FROM folders WHERE account_id = ?')
    .bind(accountId)
    .all<FolderRow>();
  const byId = new Map(folders.map((f) => [f.id, f]));
  const folder = request.type === 'create' ? null : (byId.get(request.folder_id) ?? null);
  if (request.type !== 'create') {
    if (!folder) throw notFound('Folder');
    refuseRole(folder, request.type === 'delete' ? 'deleted' : 'renamed or moved');
  }
  if (request.type === 'delete') {
    const delimiter = folder!.delimiter;
    if (delimiter && folders.some((f) => f.provider_id.startsWith(folder!.provider_id + delimiter)))
      throw new ApiError('invalid_parameters', `${folder!.provider_id} has subfolders: delete them first.`);
    return { action: { type: 'delete', path: folder!.provider_id }, folder, delimiter };
  }

  const parentId = request.parent_id === undefined ? (folder?.parent_id ?? null) : request.parent_id;
  const parent = parentId === null ? null : byId.get(parentId);
  if (parent === undefined) throw notFound(`Folder ${parentId} (parent_id)`);
  const delimiter = parent?.delimiter ?? folder?.delimiter ?? commonDelimiter(folders);
  if (folder && parent && (parent.id === folder.id || isBelow(parent, folder)))
    throw new ApiError('invalid_parameters', 'parent_id: a folder cannot be moved into itself or its own subfolder.');
  const name = request.name ?? folder!.name;
  checkName(name, delimiter);
  const path = parent ? `${parent.provider_id}${delimiter ?? ''}${name}` : name;
  if (folder && path === folder.provider_id) return { action: null, folder, delimiter: folder.delimiter };
  const taken = (p: string) => p === path || (p.toUpperCase() === 'INBOX' && path.toUpperCase() === 'INBOX');
  if (folders.some((f) => taken(f.provider_id)))
    throw new ApiError('already_exists', `A folder named ${path} already exists.`);
  const action: FolderAction = folder
    ? { type: 'rename', path: folder.provider_id, new_path: path }
    : { type: 'create', path };
  return { action, folder, delimiter };
}

function refuseRole(folder: FolderRow, what: string): void {
  if (folder.provider_id.toUpperCase() === 'INBOX')
    throw new ApiError('invalid_parameters', `INBOX cannot be ${what}.`);
  if (folder.role !== 'UNKNOWN')
    throw new ApiError(
      'invalid_parameters',
      `${folder.provider_id} has the role ${folder.role} and cannot be ${what}.`,
    );
}

function isBelow(candidate: FolderRow, ancestor: FolderRow): boolean {
  return !!ancestor.delimiter && candidate.provider_id.startsWith(ancestor.provider_id + ancestor.delimiter);
}

/** The account's hierarchy delimiter for a top-level folder: the one its folders use most. */
function commonDelimiter(folders: FolderRow[]): string | null {
  const counts = new Map<string, number>();
  for (const f of folders) if (f.delimiter) counts.set(f.delimiter, (counts.get(f.delimiter) ?? 0) + 1);
  return [...counts].sort((a, b) => b[1] - a[1])[0]?.[0] ?? null;
}

/** A name is one segment: not empty, no delimiter, no IMAP wildcard, no control character. */
function checkName(name: string, delimiter: string | null): void {
  const problem =
    name.trim() === ''
      ? 'must not be empty'
      : name !== name.trim()
        ? 'must not start or end with a space'
        : name.length > MAX_NAME_LENGTH
          ? `must be at most ${MAX_NAME_LENGTH} characters`
          : delimiter && name.includes(delimiter)
            ? `must not contain the hierarchy delimiter "${delimiter}" (use parent_id for a subfolder)`
            : /[*%\p{Cc}]/u.test(name)
              ? 'must not contain *, % or control characters'
              : null;
  if (problem) throw new ApiError('invalid_parameters', `name: ${problem}.`);
}

/**
 * After the server confirmed: the folder row, its cursor and the account's sync state say what the
 * server now has. Returns the folder (null after a delete) and the result for the object to commit.
 */
export async function recordFolderAction(
  state: SyncState,
  plan: FolderPlan,
  answer: FolderActionResult,
): Promise<{ folder: Folder | null; result: ChangeResult }> {
  const result = emptyResult();
  const action = plan.action;
  if (!action) return { folder: presentFolder(plan.folder!), result };
  switch (action.type) {
    // The path the server reports: it may have put the server's namespace prefix in front.
    case 'create':
      return { folder: recordCreate(state, plan, answer.path ?? action.path, answer, result), result };
    case 'rename':
      return { folder: recordRename(state, plan, action.path, answer.path ?? action.new_path, result), result };
    case 'delete': {
      const folder = state.folders.get(action.path);
      // Gone already: the sync's listing saw the deletion first and reported it.
      if (folder && folder.id === plan.folder!.id) {
        await deleteFolder(state, folder, result);
        state.folders.delete(action.path);
        state.cursors.delete(action.path);
        state.initialSync?.folders.delete(action.path);
      }
      return { folder: null, result };
    }
  }
}

function recordCreate(
  state: SyncState,
  plan: FolderPlan,
  path: string,
  answer: FolderActionResult,
  result: ChangeResult,
): Folder {
  const known = state.folders.get(path);
  if (known) return presentFolder(known);
  const row: FolderRow = {
    id: newId('folder'),
    account_id: state.account.accountId,
    provider_id: path,
    name: folderName(path, plan.delimiter),
    role: 'UNKNOWN',
    parent_id: parentIdOf(state, path, plan.delimiter),
    delimiter: plan.delimiter,
    total_count: answer.status?.messages ?? 0,
  };
  const now = isoNow();
  result.statements.push(
    state.env.DB.prepare(
      `INSERT INTO folders (id, account_id, provider_id, name, role, parent_id, delimiter, total_count, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).bind(row.id, row.account_id, path, row.name, row.role, row.parent_id, row.delimiter, row.total_count, now, now),
  );
  state.folders.set(path, row);
  // A new folder: all its mail is new. UIDVALIDITY 0 (STATUS not given) is learnt from the next listing.
  state.cursors.set(path, {
    path,
    uidvalidity: answer.status?.uidvalidity ?? 0,
    last_uid: 0,
    highest_modseq: null,
    resync: false,
    resync_to: 0,
    missing: 0,
    passed: 0,
  });
  addEvent(state, result, 'email.folder.create', presentFolder(row));
  return presentFolder(row);
}

/** The parent's id as the sync derives it from the path (sync/folders.ts), so its next listing agrees. */
function parentIdOf(state: SyncState, path: string, delimiter: string | null): string | null {
  const parent = parentPath(path, delimiter);
  return parent ? (state.folders.get(parent)?.id ?? null) : null;
}

/** The folder and its subfolders (which the server renamed with it) move to their new paths, ids kept. */
function recordRename(state: SyncState, plan: FolderPlan, from: string, to: string, result: ChangeResult): Folder {
  const folder = [...state.folders.values()].find((f) => f.id === plan.folder!.id);
  if (!folder) throw notFound('Folder');
  if (folder.provider_id === to) return presentFolder(folder);
  const db = state.env.DB;
  const delimiter = folder.delimiter;
  const below = delimiter ? [...state.folders.keys()].filter((p) => p.startsWith(from + delimiter)) : [];
  const now = isoNow();
  for (const path of below) {
    const moved = `${to}${path.slice(from.length)}`;
    moveFolder(state, path, { path: moved, delimiter });
    result.statements.push(
      db
        .prepare('UPDATE folders SET provider_id = ?, updated_at = ? WHERE id = ?')
        .bind(moved, now, state.folders.get(moved)!.id),
    );
  }
  moveFolder(state, folder.provider_id, { path: to, delimiter });
  folder.name = folderName(to, delimiter);
  folder.parent_id = parentIdOf(state, to, delimiter);
  result.statements.push(
    db
      .prepare('UPDATE folders SET provider_id = ?, name = ?, parent_id = ?, updated_at = ? WHERE id = ?')
      .bind(to, folder.name, folder.parent_id, now, folder.id),
  );
  addEvent(state, result, 'email.folder.update', presentFolder(folder));
  return presentFolder(folder);
}

/**
 * How long a path stays left out of listings that carry no `began` stamp (from a gateway that does
 * not stamp them): one taken before the change may still be on its way.
 */
const UNSTAMPED_WINDOW_MS = 30_000;

/**
 * Paths the API's renames and deletions took away. A folder listing the gateway began before such an
 * action ended, but that is applied after it, still shows them and would bring the folder back as a
 * new one. The gateway stamps both (gateway/stamps.ts): a listing whose `began` is at or below the
 * action's `listed_after` has the path left out; the first listing that began after the action shows
 * the server as it is, and the path is no longer held back.
 */
export class DepartedPaths {
  #paths = new Map<string, { after: number | null; until: number }>();

  add(paths: string[], listedAfter: number | undefined, now = Date.now()): void {
    for (const path of paths) this.#paths.set(path, { after: listedAfter ?? null, until: now + UNSTAMPED_WINDOW_MS });
  }

  /** The changes with departed paths left out of the folder listings that may predate their action. */
  filter(changes: Change[], now = Date.now()): Change[] {
    if (this.#paths.size === 0) return changes;
    return changes.map((change) => {
      if (change.type !== 'folders') return change;
      const heldBack = new Set<string>();
      for (const [path, { after, until }] of this.#paths) {
        const stale = after !== null && change.began !== undefined ? change.began <= after : until > now;
        if (stale) heldBack.add(path);
        else this.#paths.delete(path);
      }
      return heldBack.size ? { ...change, folders: change.folders.filter((f) => !heldBack.has(f.path)) } : change;
    });
  }
}

/** The paths a planned rename or deletion takes away: the folder's and its subfolders'. */
export function pathsLeaving(plan: FolderPlan, folders: Iterable<string>): string[] {
  const action = plan.action;
  if (!action || action.type === 'create') return [];
  const delimiter = plan.folder?.delimiter;
  return [action.path, ...(delimiter ? [...folders].filter((p) => p.startsWith(action.path + delimiter)) : [])];
}
