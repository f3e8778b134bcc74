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
import { isoNow } from '../lib/time.ts';
import { updateRows } from './bulk.ts';
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
  if (uids.length === 0) return out;
  const { results } = await state.env.DB.prepare(
    'SELECT uid, email_id FROM email_folders WHERE folder_id = ? AND uid IN (SELECT value FROM json_each(?))',
  )
    .bind(folderId, JSON.stringify([...new Set(uids)]))
    .all<{ uid: number; email_id: string }>();
  for (const r of results) out.set(r.uid, r.email_id);
  return out;
}

/** One copy of an email: its folder, its UID there and its own flags (null: not known). */
export interface Membership {
  folder_id: string;
  uid: number;
  seen: number | null;
  flagged: number | null;
}

/** For each email, the folders it is in (UID and flags there), in one query. */
export async function membershipsOf(state: SyncState, emailIds: string[]): Promise<Map<string, Membership[]>> {
  const out = new Map<string, Membership[]>();
  if (emailIds.length === 0) return out;
  const { results } = await state.env.DB.prepare(
    'SELECT email_id, folder_id, uid, seen, flagged FROM email_folders WHERE email_id IN (SELECT value FROM json_each(?))',
  )
    .bind(JSON.stringify([...new Set(emailIds)]))
    .all<Membership & { email_id: string }>();
  for (const r of results) out.set(r.email_id, [...(out.get(r.email_id) ?? []), r]);
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
  const copies = new Map<string, FlagState>();
  const rows: unknown[][] = [];
  for (const u of updates) {
    const emailId = byUid.get(u.uid);
    if (!emailId) continue;
    const flags = flagState(u.flags);
    copies.set(emailId, flags);
    rows.push([where.folder.id, u.uid, flags.unread ? 0 : 1, flags.starred ? 1 : 0]);
  }
  result.statements.push(...copyFlagsStatements(state, rows));
  if (copies.size) await refreshEmails(state, [...copies.keys()], result, { folder: where.folder, copies });
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
export const detachStale = (state: SyncState, folder: FolderRow, result: ChangeResult) =>
  detachMatching(state, folder, 'uid < 0', result);

/** Remove every membership of a folder (the folder is gone). */
export const detachAll = (state: SyncState, folder: FolderRow, result: ChangeResult) =>
  detachMatching(state, folder, '1', result);

async function detachMatching(state: SyncState, folder: FolderRow, condition: 'uid < 0' | '1', result: ChangeResult) {
  const { results } = await state.env.DB.prepare(`SELECT uid FROM email_folders WHERE folder_id = ? AND ${condition}`)
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
 * are marked orphaned with the batch's mark in the same unit (deleted once every folder has been
 * read since, unless the other side of a move arrives first: sync/orphans.ts).
 */
export async function detach(state: SyncState, folder: FolderRow, uids: number[], result: ChangeResult): Promise<void> {
  const db = state.env.DB;
  const byUid = await membershipsByUid(state, folder.id, uids);
  if (byUid.size === 0) return;
  const emailIds = [...new Set(byUid.values())];
  result.statements.push(
    db
      .prepare('DELETE FROM email_folders WHERE folder_id = ? AND uid IN (SELECT value FROM json_each(?))')
      .bind(folder.id, JSON.stringify([...byUid.keys()])),
    db
      .prepare(
        `UPDATE emails SET orphaned_at_ms = ? WHERE id IN (SELECT value FROM json_each(?))
         AND NOT EXISTS (SELECT 1 FROM email_folders WHERE email_id = emails.id)`,
      )
      .bind(state.orphanMark, JSON.stringify(emailIds)),
  );
  const memberships = await membershipsOf(state, emailIds);
  const stillFiled = emailIds.filter((id) => (memberships.get(id) ?? []).some((m) => m.folder_id !== folder.id));
  result.orphans.push(...emailIds.filter((id) => !stillFiled.includes(id)));
  if (stillFiled.length)
    await refreshEmails(state, stillFiled, result, { folder, removed: true }, { unitPerEmail: false });
  endUnit(result);
}

/** Writes copies' flags, rows of [folder_id, uid, seen, flagged] (the emails' own flags are recomputed from their copies). */
export function copyFlagsStatements(state: SyncState, rows: unknown[][]): D1PreparedStatement[] {
  return updateRows(state.env.DB, 'email_folders', ['folder_id', 'uid'], ['seen', 'flagged'], rows);
}

/**
 * An email's flags from its copies: unread while no copy is \Seen, starred while some copy is
 * \Flagged. A copy whose flags are not known yet counts with the email's current flags.
 */
export function combinedFlags(copies: Membership[], current: { unread: number; starred: number }) {
  if (copies.length === 0) return current;
  const seen = copies.some((c) => (c.seen ?? (current.unread ? 0 : 1)) === 1);
  const flagged = copies.some((c) => (c.flagged ?? current.starred) === 1);
  return { unread: seen ? 0 : 1, starred: flagged ? 1 : 0 };
}

/**
 * Recompute folders, role and flags of emails after a change to their copies in `change.folder`
 * (flags read there, a copy added there, or the copy there removed), write what differs, and emit
 * one email.update for each email that really changed.
 */
export async function refreshEmails(
  state: SyncState,
  emailIds: string[],
  result: ChangeResult,
  change: {
    folder: FolderRow;
    copies?: Map<string, FlagState>;
    added?: boolean;
    removed?: boolean;
    /** Places (`folder_id:uid`) this change also removes: a move's source, left in the same unit. */
    departed?: Set<string>;
  },
  { unitPerEmail = true }: { unitPerEmail?: boolean } = {},
): Promise<void> {
  const db = state.env.DB;
  if (emailIds.length === 0) return;
  const { results: rows } = await db
    .prepare('SELECT * FROM emails WHERE id IN (SELECT value FROM json_each(?))')
    .bind(JSON.stringify([...new Set(emailIds)]))
    .all<EmailRow>();
  const records = await loadEmailRecords(state.env, rows);
  const memberships = await membershipsOf(state, emailIds);
  const folderById = new Map([...state.folders.values()].map((f) => [f.id, f]));
  const here = change.folder.id;
  const now = isoNow();
  const changed: unknown[][] = [];
  const events: EmailRecord[] = [];

  for (const record of records) {
    const { row } = record;
    // The copies as they are once this change is written.
    let copies = (memberships.get(row.id) ?? []).filter(
      (m) => (m.folder_id !== here || !change.removed) && !change.departed?.has(`${m.folder_id}:${m.uid}`),
    );
    const flags = change.copies?.get(row.id);
    if (flags) {
      const mine = { folder_id: here, uid: 0, seen: flags.unread ? 0 : 1, flagged: flags.starred ? 1 : 0 };
      copies = [...copies.filter((m) => m.folder_id !== here), mine];
    }
    const folderIds = [...new Set(copies.map((m) => m.folder_id))].sort();
    const role = mainRole(folderIds.map((id) => folderById.get(id)?.role ?? 'UNKNOWN'));
    const { unread, starred } = combinedFlags(copies, row);
    const before = [...record.folder_ids].sort();
    const foldersChanged = folderIds.join() !== before.join();
    if (!foldersChanged && role === row.role && unread === row.unread && starred === row.starred) continue;

    changed.push([row.id, role, unread, starred]);
    events.push({ ...record, row: { ...row, role, unread, starred, updated_at: now }, folder_ids: folderIds });
  }
  // One statement for all (per JSON chunk), then one email.update each: one unit.
  result.statements.push(
    ...updateRows(db, 'emails', ['id'], ['role', 'unread', 'starred'], changed, {
      sql: 'updated_at = ?2',
      params: [now],
    }),
  );
  for (const updated of events) addEvent(state, result, 'email.update', emailEventData(updated));
  if (unitPerEmail && events.length) endUnit(result);
}
