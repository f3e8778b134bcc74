/**
 * Which email a (folder, UID) is, and what follows when memberships go: flags, expunges, snapshots,
 * stale memberships after a UIDVALIDITY change, and the email.update of emails whose folders or
 * flags changed.
 *
 * A membership with a negative UID is stale: it was read under an earlier UIDVALIDITY of its folder
 * and waits for the folder's re-read, which gives it its new UID (same email, same id). Stale
 * memberships still count as folders of their email, so nothing changes in the API while a
 * renumbered folder is read again, however long that takes.
 */
import { emailEventData } from '../emails/events.ts';
import type { EmailRecord, EmailRow } from '../emails/present.ts';
import { loadEmailRecords } from '../emails/store.ts';
import { mainRole, type FolderRow } from '../folders/present.ts';
import { chunks, placeholders } from '../lib/sql.ts';
import { isoNow } from '../lib/time.ts';
import { addEvent, emptyResult, endUnit, type ChangeResult, type SyncState } from './state.ts';

export type FlagState = { unread: boolean; starred: boolean; draft: boolean };

export function flagState(flags: string[]): FlagState {
  const set = new Set(flags.map((f) => f.toLowerCase()));
  return { unread: !set.has('\\seen'), starred: set.has('\\flagged'), draft: set.has('\\draft') };
}

/** The folder and cursor a change addresses, or null when the change is stale (unknown folder, older UIDVALIDITY). */
export function target(state: SyncState, path: string, uidvalidity: number) {
  const folder = state.folders.get(path);
  const cursor = state.cursors.get(path);
  if (!folder || !cursor || cursor.uidvalidity !== uidvalidity) return null;
  return { folder, cursor };
}

export async function membershipsByUid(
  state: SyncState,
  folderId: string,
  uids: number[],
): Promise<Map<number, string>> {
  const out = new Map<number, string>();
  for (const part of chunks([...new Set(uids)])) {
    const { results } = await state.env.DB.prepare(
      `SELECT uid, email_id FROM email_folders WHERE folder_id = ? AND uid IN (${placeholders(part.length)})`,
    )
      .bind(folderId, ...part)
      .all<{ uid: number; email_id: string }>();
    for (const r of results) out.set(r.uid, r.email_id);
  }
  return out;
}

/** For each email, the folders it is in (and the UID there), in one query per chunk. */
export async function membershipsOf(
  state: SyncState,
  emailIds: string[],
): Promise<Map<string, { folder_id: string; uid: number }[]>> {
  const out = new Map<string, { folder_id: string; uid: number }[]>();
  for (const part of chunks([...new Set(emailIds)])) {
    const { results } = await state.env.DB.prepare(
      `SELECT email_id, folder_id, uid FROM email_folders WHERE email_id IN (${placeholders(part.length)})`,
    )
      .bind(...part)
      .all<{ email_id: string; folder_id: string; uid: number }>();
    for (const r of results) out.set(r.email_id, [...(out.get(r.email_id) ?? []), r]);
  }
  return out;
}

export async function applyFlags(
  state: SyncState,
  path: string,
  uidvalidity: number,
  updates: { uid: number; flags: string[] }[],
): Promise<ChangeResult> {
  const result = emptyResult();
  const where = target(state, path, uidvalidity);
  if (!where || updates.length === 0) return result;
  const byUid = await membershipsByUid(
    state,
    where.folder.id,
    updates.map((u) => u.uid),
  );
  const wanted = new Map<string, FlagState>();
  for (const u of updates) {
    const emailId = byUid.get(u.uid);
    if (emailId) wanted.set(emailId, flagState(u.flags));
  }
  if (wanted.size) await refreshEmails(state, [...wanted.keys()], result, { flags: wanted });
  return result;
}

export async function applyVanished(
  state: SyncState,
  path: string,
  uidvalidity: number,
  uids: number[],
): Promise<ChangeResult> {
  const result = emptyResult();
  const where = target(state, path, uidvalidity);
  if (where && uids.length) await detach(state, where.folder, uids, result);
  return result;
}

/** Every UID the folder holds up to the cursor: the known ones not listed vanished. */
export async function applySnapshot(
  state: SyncState,
  path: string,
  uidvalidity: number,
  uids: number[],
): Promise<ChangeResult> {
  const where = target(state, path, uidvalidity);
  if (!where) return emptyResult();
  const present = new Set(uids);
  const { results } = await state.env.DB.prepare(
    'SELECT uid FROM email_folders WHERE folder_id = ? AND uid > 0 AND uid <= ?',
  )
    .bind(where.folder.id, where.cursor.last_uid)
    .all<{ uid: number }>();
  const gone = results.map((r) => r.uid).filter((uid) => !present.has(uid));
  return applyVanished(state, path, uidvalidity, gone);
}

/**
 * The folder was renumbered (new UIDVALIDITY): its memberships become stale (negative UIDs, each
 * below any stale one already there, so they never collide with a new UID or with each other).
 */
export async function markStale(state: SyncState, folder: FolderRow, result: ChangeResult): Promise<void> {
  const row = await state.env.DB.prepare(
    'SELECT COALESCE(-MIN(uid), 0) AS floor FROM email_folders WHERE folder_id = ? AND uid < 0',
  )
    .bind(folder.id)
    .first<{ floor: number }>();
  result.statements.push(
    state.env.DB.prepare('UPDATE email_folders SET uid = -uid - ? WHERE folder_id = ? AND uid > 0').bind(
      row?.floor ?? 0,
      folder.id,
    ),
  );
  endUnit(result);
}

/** The re-read of a renumbered folder is complete: what it did not find again is gone. */
export async function detachStale(state: SyncState, folder: FolderRow, result: ChangeResult): Promise<void> {
  const { results } = await state.env.DB.prepare('SELECT uid FROM email_folders WHERE folder_id = ? AND uid < 0')
    .bind(folder.id)
    .all<{ uid: number }>();
  if (results.length)
    await detach(
      state,
      folder,
      results.map((r) => r.uid),
      result,
    );
}

/** Remove every membership of a folder (the folder is gone). */
export async function detachAll(state: SyncState, folder: FolderRow, result: ChangeResult): Promise<void> {
  const { results } = await state.env.DB.prepare('SELECT uid FROM email_folders WHERE folder_id = ?')
    .bind(folder.id)
    .all<{ uid: number }>();
  if (results.length)
    await detach(
      state,
      folder,
      results.map((r) => r.uid),
      result,
    );
}

/**
 * Remove (folder, uid) memberships. Emails still in another folder get email.update; the others
 * are marked orphaned in the same unit of the batch (deleted by the object's alarm after a short
 * grace, unless the other side of a move arrives first).
 */
export async function detach(state: SyncState, folder: FolderRow, uids: number[], result: ChangeResult): Promise<void> {
  const db = state.env.DB;
  const byUid = await membershipsByUid(state, folder.id, uids);
  const now = Date.now();
  for (const part of chunks([...byUid.keys()])) {
    const emailIds = [...new Set(part.map((uid) => byUid.get(uid)!))];
    result.statements.push(
      db
        .prepare(`DELETE FROM email_folders WHERE folder_id = ? AND uid IN (${placeholders(part.length)})`)
        .bind(folder.id, ...part),
      db
        .prepare(
          `UPDATE emails SET orphaned_at_ms = ? WHERE id IN (${placeholders(emailIds.length)})
           AND NOT EXISTS (SELECT 1 FROM email_folders WHERE email_id = emails.id)`,
        )
        .bind(now, ...emailIds),
    );
    const memberships = await membershipsOf(state, emailIds);
    const stillFiled = emailIds.filter((id) => (memberships.get(id) ?? []).some((m) => m.folder_id !== folder.id));
    result.orphans.push(...emailIds.filter((id) => !stillFiled.includes(id)));
    if (stillFiled.length)
      await refreshEmails(state, stillFiled, result, { folderRemoved: folder.id }, { unitPerEmail: false });
    endUnit(result);
  }
}

/**
 * Recompute role and flags of emails whose folders or flags changed, write what differs, and
 * emit one email.update for each email that really changed.
 */
export async function refreshEmails(
  state: SyncState,
  emailIds: string[],
  result: ChangeResult,
  change: { flags?: Map<string, FlagState>; folderRemoved?: string; folderAdded?: FolderRow },
  { unitPerEmail = true }: { unitPerEmail?: boolean } = {},
): Promise<void> {
  const db = state.env.DB;
  const rows: EmailRow[] = [];
  for (const part of chunks(emailIds)) {
    const { results } = await db
      .prepare(`SELECT * FROM emails WHERE id IN (${placeholders(part.length)})`)
      .bind(...part)
      .all<EmailRow>();
    rows.push(...results);
  }
  const records = await loadEmailRecords(state.env, rows);
  const folderById = new Map([...state.folders.values()].map((f) => [f.id, f]));
  const now = isoNow();

  for (const record of records) {
    const { row } = record;
    let folderIds = record.folder_ids;
    if (change.folderRemoved) folderIds = folderIds.filter((id) => id !== change.folderRemoved);
    if (change.folderAdded && !folderIds.includes(change.folderAdded.id))
      folderIds = [...folderIds, change.folderAdded.id];
    const role = mainRole(folderIds.map((id) => folderById.get(id)?.role ?? 'UNKNOWN'));
    const flags = change.flags?.get(row.id);
    const unread = flags ? (flags.unread ? 1 : 0) : row.unread;
    const starred = flags ? (flags.starred ? 1 : 0) : row.starred;
    const foldersChanged =
      folderIds.length !== record.folder_ids.length || folderIds.some((id) => !record.folder_ids.includes(id));
    if (!foldersChanged && role === row.role && unread === row.unread && starred === row.starred) continue;

    result.statements.push(
      db
        .prepare('UPDATE emails SET role = ?, unread = ?, starred = ?, updated_at = ? WHERE id = ?')
        .bind(role, unread, starred, now, row.id),
    );
    const updated: EmailRecord = {
      ...record,
      row: { ...row, role, unread, starred, updated_at: now },
      folder_ids: folderIds,
    };
    addEvent(state, result, 'email.update', emailEventData(updated));
    if (unitPerEmail) endUnit(result);
  }
}
