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
import { chunks } from '../lib/sql.ts';
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

/**
 * Ids looked up per statement: one bound JSON value of a few tens of KB, and a result of as many
 * rows, whatever a change holds (the gateway sends at most MAX_CHANGE_UIDS per change; this keeps
 * the Worker within D1's limits for any caller).
 */
export const LOOKUP_CHUNK = 2_000;

export async function membershipsByUid(
  state: SyncState,
  folderId: string,
  uids: number[],
): Promise<Map<number, string>> {
  const out = new Map<number, string>();
  for (const r of await copiesByUid(state, folderId, uids)) out.set(r.uid, r.email_id);
  return out;
}

/** The copies at these UIDs of a folder, with their own flags. */
async function copiesByUid(state: SyncState, folderId: string, uids: number[]) {
  const rows: (Membership & { email_id: string })[] = [];
  for (const part of chunks([...new Set(uids)], LOOKUP_CHUNK)) {
    const { results } = await state.env.DB.prepare(
      'SELECT email_id, folder_id, uid, seen, flagged FROM email_folders WHERE folder_id = ? AND uid IN (SELECT value FROM json_each(?))',
    )
      .bind(folderId, JSON.stringify(part))
      .all<Membership & { email_id: string }>();
    rows.push(...results);
  }
  return rows;
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
  for (const part of chunks([...new Set(emailIds)], LOOKUP_CHUNK)) {
    const { results } = await state.env.DB.prepare(
      'SELECT email_id, folder_id, uid, seen, flagged FROM email_folders WHERE email_id IN (SELECT value FROM json_each(?))',
    )
      .bind(JSON.stringify(part))
      .all<Membership & { email_id: string }>();
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
  const byUid = new Map(
    (
      await copiesByUid(
        state,
        where.folder.id,
        updates.map((u) => u.uid),
      )
    ).map((m) => [m.uid, m]),
  );
  const copies = new Map<string, FlagState>();
  const rows: unknown[][] = [];
  for (const u of updates) {
    const copy = byUid.get(u.uid);
    if (!copy) continue;
    const flags = flagState(u.flags);
    const seen = flags.unread ? 0 : 1;
    const flagged = flags.starred ? 1 : 0;
    // A copy whose flags did not change costs nothing (a full re-read of a large folder's flags).
    if (copy.seen === seen && copy.flagged === flagged) continue;
    copies.set(copy.email_id, flags);
    rows.push([where.folder.id, u.uid, seen, flagged]);
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

/**
 * Every UID the folder holds in a range (from `fromUid` up to `upTo`, else up to the cursor): the
 * known ones not listed vanished. Known UIDs above the range are left alone, however far the cursor is.
 */
export async function applySnapshot(
  state: SyncState,
  path: string,
  uidvalidity: number,
  uids: number[],
  { fromUid = 1, upTo }: { fromUid?: number; upTo?: number } = {},
): Promise<ChangeResult> {
  const where = target(state, path, uidvalidity);
  if (!where) return emptyResult();
  const present = new Set(uids);
  const { results } = await state.env.DB.prepare(
    'SELECT uid FROM email_folders WHERE folder_id = ? AND uid >= ? AND uid <= ?',
  )
    .bind(where.folder.id, Math.max(1, fromUid), upTo ?? where.cursor.last_uid)
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

/**
 * Memberships of a folder, however many, removed in one unit of three set-based statements: the
 * emails left in no folder are marked orphaned (as `detach` does), and those still filed elsewhere
 * are queued for their refresh and email.update, which the account's alarm makes a bounded step at
 * a time (sync/departures.ts).
 */
function detachMatching(state: SyncState, folder: FolderRow, condition: 'uid < 0' | '1', result: ChangeResult) {
  const db = state.env.DB;
  const leaving = `folder_id = ?1 AND ${condition}`;
  const elsewhere = (email: string) =>
    `EXISTS (SELECT 1 FROM email_folders o WHERE o.email_id = ${email} AND o.folder_id != ?1)`;
  result.statements.push(
    db
      .prepare(
        `INSERT OR IGNORE INTO folder_departures (email_id, folder_id, account_id)
         SELECT email_id, folder_id, ?2 FROM email_folders m WHERE ${leaving} AND ${elsewhere('m.email_id')}`,
      )
      .bind(folder.id, state.account.accountId),
    db
      .prepare(
        `UPDATE emails SET orphaned_at_ms = ?2
         WHERE id IN (SELECT email_id FROM email_folders WHERE ${leaving}) AND NOT ${elsewhere('emails.id')}`,
      )
      .bind(folder.id, state.orphanMark),
    db.prepare(`DELETE FROM email_folders WHERE ${leaving}`).bind(folder.id),
  );
  result.orphaned = true;
  result.departed = true;
  endUnit(result);
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
  for (const part of chunks([...byUid.keys()], LOOKUP_CHUNK))
    result.statements.push(
      db
        .prepare('DELETE FROM email_folders WHERE folder_id = ? AND uid IN (SELECT value FROM json_each(?))')
        .bind(folder.id, JSON.stringify(part)),
    );
  for (const part of chunks(emailIds, LOOKUP_CHUNK))
    result.statements.push(
      db
        .prepare(
          `UPDATE emails SET orphaned_at_ms = ? WHERE id IN (SELECT value FROM json_each(?))
           AND NOT EXISTS (SELECT 1 FROM email_folders WHERE email_id = emails.id)`,
        )
        .bind(state.orphanMark, JSON.stringify(part)),
    );
  const memberships = await membershipsOf(state, emailIds);
  const stillFiled = emailIds.filter((id) => (memberships.get(id) ?? []).some((m) => m.folder_id !== folder.id));
  if (stillFiled.length < emailIds.length) result.orphaned = true;
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

/** Whole email rows read per statement (rows may carry their body in-row: the result stays a few MB). */
const REFRESH_CHUNK = 500;

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
    /** The folder the change is in; none for departures, which an earlier unit wrote. */
    folder?: FolderRow;
    copies?: Map<string, FlagState>;
    added?: boolean;
    removed?: boolean;
    /** Places (`folder_id:uid`) this change also removes: a move's source, left in the same unit. */
    departed?: Set<string>;
    /** Folders each email left in an earlier unit (sync/departures.ts): counted as where it was. */
    left?: Map<string, string[]>;
  },
  { unitPerEmail = true }: { unitPerEmail?: boolean } = {},
): Promise<void> {
  const db = state.env.DB;
  if (emailIds.length === 0) return;
  const records: EmailRecord[] = [];
  for (const part of chunks([...new Set(emailIds)], REFRESH_CHUNK)) {
    const { results: rows } = await db
      .prepare('SELECT * FROM emails WHERE id IN (SELECT value FROM json_each(?))')
      .bind(JSON.stringify(part))
      .all<EmailRow>();
    records.push(...(await loadEmailRecords(state.env, rows)));
  }
  const memberships = await membershipsOf(state, emailIds);
  const folderById = new Map([...state.folders.values()].map((f) => [f.id, f]));
  const here = change.folder?.id;
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
    if (flags && here) {
      const mine = { folder_id: here, uid: 0, seen: flags.unread ? 0 : 1, flagged: flags.starred ? 1 : 0 };
      copies = [...copies.filter((m) => m.folder_id !== here), mine];
    }
    const folderIds = [...new Set(copies.map((m) => m.folder_id))].sort();
    const role = mainRole(folderIds.map((id) => folderById.get(id)?.role ?? 'UNKNOWN'));
    const { unread, starred } = combinedFlags(copies, row);
    const before = [...new Set([...record.folder_ids, ...(change.left?.get(row.id) ?? [])])].sort();
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
