/**
 * The folder listing the gateway reports, reconciled with the account's folders. A folder keeps its
 * `fld_` id and its emails whatever the server does, unless the server really deleted it:
 * - a folder whose STATUS failed (UIDVALIDITY 0 in the listing) is left as it is;
 * - a folder missing from one listing is deleted only when the next listing confirms it;
 * - a rename (a folder leaves its path, one path newly carries its UIDVALIDITY, a value no other
 *   folder has) keeps the folder, its cursor and its emails, and sends one email.folder.update; a
 *   new folder at the old path, or an old one displaced at the new path, is created or deleted;
 * - a new UIDVALIDITY makes the folder's memberships stale until its re-read finds them again.
 */
import type { FolderInfo } from '../../common/relay.ts';
import { folderName, parentPath, presentFolder, roleOf, type FolderRow } from '../folders/present.ts';
import { newId } from '../lib/ids.ts';
import { isoNow } from '../lib/time.ts';
import { detachAll, markStale } from './memberships.ts';
import { addEvent, emptyResult, type ChangeResult, type SyncState } from './state.ts';

/** Listings in a row a folder must be missing from before it is deleted. */
const MISSING_LISTINGS_TO_DELETE = 2;

/**
 * The complete folder listing. `baseline` is the listing taken when the account connects: its
 * folders are created silently and their cursors start at the current UIDNEXT, so only mail that
 * arrives afterwards enters the API.
 */
export async function applyFolders(
  state: SyncState,
  listing: FolderInfo[],
  { baseline }: { baseline: boolean },
): Promise<ChangeResult> {
  const result = emptyResult();
  const db = state.env.DB;
  const now = isoNow();
  const { renamed, displaced } = followRenames(state, listing);
  // Paths are unique: a displaced folder goes, and a moved one takes its new path, before any
  // folder is created at a path one of them held.
  for (const folder of displaced) await deleteFolder(state, folder, result);
  for (const path of renamed) {
    const moved = state.folders.get(path)!;
    result.statements.push(db.prepare('UPDATE folders SET provider_id = ? WHERE id = ?').bind(path, moved.id));
  }
  // Parents before children, so parent ids are known.
  const sorted = [...listing].sort(
    (a, b) => a.path.split(a.delimiter ?? '\u0000').length - b.path.split(b.delimiter ?? '\u0000').length,
  );

  for (const info of sorted) {
    const known = info.uidvalidity > 0;
    const parent = parentPath(info.path, info.delimiter);
    const existing = state.folders.get(info.path);
    const wanted = {
      name: folderName(info.path, info.delimiter),
      role: roleOf(info),
      parent_id: parent ? (state.folders.get(parent)?.id ?? null) : null,
      // A folder whose STATUS failed keeps the count it had.
      total_count: known || !existing ? info.total : existing.total_count,
    };
    if (!existing) {
      const row: FolderRow = {
        id: newId('folder'),
        account_id: state.account.accountId,
        provider_id: info.path,
        delimiter: info.delimiter,
        ...wanted,
      };
      state.folders.set(info.path, row);
      result.statements.push(
        db
          .prepare(
            `INSERT INTO folders (id, account_id, provider_id, name, role, parent_id, delimiter, total_count, created_at, updated_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          )
          .bind(
            row.id,
            row.account_id,
            row.provider_id,
            row.name,
            row.role,
            row.parent_id,
            row.delimiter,
            row.total_count,
            now,
            now,
          ),
      );
      if (!baseline) addEvent(state, result, 'email.folder.create', presentFolder(row));
    } else {
      // Path, name, role or parent: what a client shows of a folder, and what `email.folder.update` reports.
      const describedDifferently =
        renamed.has(info.path) ||
        existing.name !== wanted.name ||
        existing.role !== wanted.role ||
        existing.parent_id !== wanted.parent_id;
      if (describedDifferently || existing.total_count !== wanted.total_count) {
        Object.assign(existing, wanted);
        result.statements.push(
          db
            .prepare(
              'UPDATE folders SET provider_id = ?, name = ?, role = ?, parent_id = ?, total_count = ?, updated_at = ? WHERE id = ?',
            )
            .bind(info.path, wanted.name, wanted.role, wanted.parent_id, wanted.total_count, now, existing.id),
        );
        // Counts move with every message; only a change of identity is worth an event.
        if (describedDifferently) addEvent(state, result, 'email.folder.update', presentFolder(existing));
      }
    }
    await reconcileCursor(state, info, baseline, result);
  }

  const listed = new Set(listing.map((f) => f.path));
  for (const [path, folder] of [...state.folders]) {
    if (listed.has(path)) continue;
    const cursor = state.cursors.get(path);
    if (cursor && cursor.missing + 1 < MISSING_LISTINGS_TO_DELETE) {
      cursor.missing += 1;
      continue;
    }
    await deleteFolder(state, folder, result);
    state.folders.delete(path);
    state.cursors.delete(path);
    state.initialSync?.folders.delete(path);
  }
  return result;
}

/** A folder the server deleted: its memberships go (emails left in no folder become orphans), with email.folder.delete. */
export async function deleteFolder(state: SyncState, folder: FolderRow, result: ChangeResult): Promise<void> {
  detachAll(state, folder, result);
  result.statements.push(state.env.DB.prepare('DELETE FROM folders WHERE id = ?').bind(folder.id));
  addEvent(state, result, 'email.folder.delete', presentFolder(folder));
}

async function reconcileCursor(
  state: SyncState,
  info: FolderInfo,
  baseline: boolean,
  result: ChangeResult,
): Promise<void> {
  const cursor = state.cursors.get(info.path);
  if (!cursor) {
    state.cursors.set(info.path, {
      path: info.path,
      uidvalidity: info.uidvalidity,
      // At connect: everything already there is history. Later: a new folder's mail is all new.
      last_uid: baseline ? Math.max(0, info.uidnext - 1) : 0,
      highest_modseq: baseline ? info.highest_modseq : null,
      resync: false,
      resync_to: 0,
      missing: 0,
      passed: 0,
    });
    return;
  }
  cursor.missing = 0;
  // STATUS failed this time: nothing is known about the folder, so nothing changes.
  if (info.uidvalidity === 0 || cursor.uidvalidity === info.uidvalidity) return;
  if (cursor.uidvalidity === 0) {
    // The folder's first successful STATUS: nothing was read under "unknown".
    cursor.uidvalidity = info.uidvalidity;
    cursor.passed = 0;
    return;
  }
  // The server renumbered the folder: read it again; emails keep their ids (see memberships.ts).
  await markStale(state, state.folders.get(info.path)!, result);
  Object.assign(cursor, {
    uidvalidity: info.uidvalidity,
    last_uid: 0,
    highest_modseq: null,
    resync: true,
    resync_to: Math.max(0, info.uidnext - 1),
    passed: 0,
  });
}

/**
 * Folders renamed on the server: a folder that left its path (the path disappeared, or now holds a
 * folder with another UIDVALIDITY) and exactly one path newly carrying its UIDVALIDITY (unambiguous
 * on both sides). The folder row, its cursor and its initial-sync range move to the new path here;
 * the caller writes the row. A folder the move displaces (the destination path held another one,
 * deleted on the server just before) is returned for the caller to delete; a path left behind that
 * is still listed holds a new folder, which the caller creates.
 */
function followRenames(state: SyncState, listing: FolderInfo[]): { renamed: Set<string>; displaced: FolderRow[] } {
  const listed = new Set(listing.map((f) => f.path));
  const knownUidvalidity = (path: string) => state.cursors.get(path)?.uidvalidity ?? 0;
  // A listed path whose UIDVALIDITY changed: its old folder left, and a new one is there.
  const replaced = listing.filter(
    (f) =>
      f.uidvalidity > 0 &&
      state.folders.has(f.path) &&
      knownUidvalidity(f.path) > 0 &&
      knownUidvalidity(f.path) !== f.uidvalidity,
  );
  const gone = [...state.folders.keys()].filter((path) => !listed.has(path)).concat(replaced.map((f) => f.path));
  const arrived = listing.filter((f) => !state.folders.has(f.path) && f.uidvalidity > 0).concat(replaced);
  const renamed = new Set<string>();
  const displaced: FolderRow[] = [];
  for (const info of arrived) {
    // A server that gives many folders one UIDVALIDITY says nothing about renames: only a value no
    // other listed folder carries counts, on the new side and on the old side.
    const from = gone.filter((path) => path !== info.path && knownUidvalidity(path) === info.uidvalidity);
    const twins = listing.filter((f) => f.uidvalidity === info.uidvalidity);
    if (from.length !== 1 || twins.length !== 1) continue;
    const oldPath = from[0]!;
    const folder = state.folders.get(oldPath)!;
    const cursor = state.cursors.get(oldPath)!;
    // A renamed folder keeps its UIDs: its UIDNEXT cannot be below what was read of it.
    if (info.uidnext !== 0 && info.uidnext <= cursor.last_uid) continue;
    const before = state.folders.get(info.path);
    // The UIDVALIDITY a path's own folder was renumbered to may happen to be a gone folder's: it is
    // taken for a rename onto the path only when its count is nearer that folder's than its own (a
    // reset keeps the messages), or when the path's folder was missing from the last listing (a reset
    // does not take a folder out of the list; a deletion does). Taken for a rename, a reset would skip
    // the renumbered mail as read; taken for a reset, a rename would read its mail again as copies.
    const nearer = (a: number, b: number) => Math.abs(info.total - a) < Math.abs(info.total - b);
    const beforeWasGone = (state.cursors.get(info.path)?.missing ?? 0) > 0;
    if (before && !beforeWasGone && !nearer(folder.total_count, before.total_count)) continue;
    if (before) displaced.push(before);
    moveFolder(state, oldPath, info);
    gone.splice(gone.indexOf(oldPath), 1);
    renamed.add(info.path);
  }
  const renumbered = renamedAndRenumbered(state, listing, gone);
  if (renumbered) {
    moveFolder(state, renumbered.from, renumbered.to);
    renamed.add(renumbered.to.path);
  }
  return { renamed, displaced };
}

/**
 * Some servers (Courier) give a renamed folder a new UIDVALIDITY. One folder gone and one new path in
 * the same listing, under the same parent, holding as many messages, is taken for that folder renamed
 * and renumbered: it keeps its `fld_` id, and its changed UIDVALIDITY makes the caller read it again,
 * so its emails keep theirs. (Were it a deletion and a creation, the re-read finds none of the old
 * mail, which then goes as if deleted: only the folder id was inherited.)
 */
function renamedAndRenumbered(
  state: SyncState,
  listing: FolderInfo[],
  gone: string[],
): { from: string; to: FolderInfo } | null {
  const listed = new Set(listing.map((f) => f.path));
  const left = gone.filter((path) => !listed.has(path) && state.cursors.get(path)?.missing === 0);
  const arrived = listing.filter((f) => !state.folders.has(f.path) && f.uidvalidity > 0);
  if (left.length !== 1 || arrived.length !== 1) return null;
  const from = left[0]!;
  const to = arrived[0]!;
  const folder = state.folders.get(from)!;
  const sameParent = parentPath(from, folder.delimiter) === parentPath(to.path, to.delimiter);
  return sameParent && folder.total_count === to.total ? { from, to } : null;
}

/** The folder row, its cursor and its initial-sync range move to the new path (the caller writes the row). */
export function moveFolder(state: SyncState, oldPath: string, info: Pick<FolderInfo, 'path' | 'delimiter'>): void {
  const folder = state.folders.get(oldPath)!;
  const cursor = state.cursors.get(oldPath)!;
  state.folders.delete(oldPath);
  state.cursors.delete(oldPath);
  folder.provider_id = info.path;
  folder.delimiter = info.delimiter;
  state.folders.set(info.path, folder);
  state.cursors.set(info.path, { ...cursor, path: info.path, missing: 0 });
  const pending = state.initialSync?.folders.get(oldPath);
  state.initialSync?.folders.delete(info.path);
  if (pending) {
    state.initialSync!.folders.delete(oldPath);
    state.initialSync!.folders.set(info.path, pending);
  }
}
