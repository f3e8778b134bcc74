/**
 * Mailbox actions on one email (read/unread, star, folder set, trash): planned from what D1 knows
 * about where the email is (folder path + UID), carried out by the gateway, then written to D1 with
 * the email.update event in one batch, so that the sync seeing the same change later finds nothing
 * to do.
 */
import type { ModifyResult, ModifyStep } from '../../common/relay.ts';
import type { Env } from '../env.ts';
import { emailEventData } from '../emails/events.ts';
import type { EmailRecord, EmailRow } from '../emails/present.ts';
import { loadEmail } from '../emails/store.ts';
import { eventStatement, newEvent, type OutboxEvent } from '../events/outbox.ts';
import { mainRole } from '../folders/present.ts';
import { ApiError, notFound } from '../lib/errors.ts';
import type { CursorState } from '../sync/state.ts';
import { isoNow } from '../lib/time.ts';

/** What the client asked for; `folder_ids` is the complete new folder set. */
export interface ModifyWanted {
  unread?: boolean;
  starred?: boolean;
  folder_ids?: string[];
}

interface Location {
  folder_id: string;
  path: string;
  uidvalidity: number;
  uid: number;
}

export interface ModifyPlan {
  emailId: string;
  steps: ModifyStep[];
  /** Per step: the folder a copy or move lands in, and the folder a move or delete leaves. */
  effects: { into: string | null; out: string | null }[];
  wanted: ModifyWanted;
}

/**
 * Where the email is on the server: folder path, UIDVALIDITY (the account object's cursor) and UID.
 * A stale membership (negative UID: its folder is being re-read after a renumbering) cannot be
 * addressed until the re-read found it again.
 */
async function locations(env: Env, emailId: string, cursors: Map<string, CursorState>): Promise<Location[]> {
  const { results } = await env.DB.prepare(
    'SELECT ef.folder_id, f.provider_id AS path, ef.uid FROM email_folders ef JOIN folders f ON f.id = ef.folder_id WHERE ef.email_id = ? ORDER BY ef.folder_id',
  )
    .bind(emailId)
    .all<Omit<Location, 'uidvalidity'>>();
  if (results.length && results.every((l) => l.uid < 0))
    throw new ApiError(
      'provider_error',
      "The email's folder is being read again after the server renumbered it; try again shortly.",
    );
  return results
    .filter((l) => l.uid > 0 && cursors.has(l.path))
    .map((l) => ({ ...l, uidvalidity: cursors.get(l.path)!.uidvalidity }));
}

/** Flags first (on every copy, so moved copies carry them), then copies, moves and deletions. */
export async function planModify(
  env: Env,
  accountId: string,
  emailId: string,
  wanted: ModifyWanted,
  cursors: Map<string, CursorState>,
): Promise<ModifyPlan> {
  const row = await env.DB.prepare('SELECT id FROM emails WHERE id = ? AND account_id = ?')
    .bind(emailId, accountId)
    .first<{ id: string }>();
  if (!row) throw notFound('Email');
  const here = await locations(env, emailId, cursors);
  if (here.length === 0) throw notFound('Email (it is in no folder right now)');
  const steps: ModifyStep[] = [];
  const effects: ModifyPlan['effects'] = [];
  const add: string[] = [];
  const remove: string[] = [];
  if (wanted.unread !== undefined) (wanted.unread ? remove : add).push('\\Seen');
  if (wanted.starred !== undefined) (wanted.starred ? add : remove).push('\\Flagged');
  if (add.length || remove.length) {
    for (const l of here) {
      steps.push({ type: 'flags', path: l.path, uidvalidity: l.uidvalidity, uid: l.uid, add, remove });
      effects.push({ into: null, out: null });
    }
  }
  if (wanted.folder_ids) {
    const target = new Set(wanted.folder_ids);
    const { results: paths } = await env.DB.prepare(`SELECT id, provider_id FROM folders WHERE account_id = ?`)
      .bind(accountId)
      .all<{ id: string; provider_id: string }>();
    const pathOf = new Map(paths.map((f) => [f.id, f.provider_id]));
    const leaving = here.filter((l) => !target.has(l.folder_id));
    const source = here[0]!;
    for (const folderId of target) {
      if (here.some((l) => l.folder_id === folderId)) continue;
      const destination = pathOf.get(folderId);
      if (!destination) throw notFound(`Folder ${folderId}`);
      const from = leaving.shift();
      if (from) {
        steps.push({ type: 'move', path: from.path, uidvalidity: from.uidvalidity, uid: from.uid, destination });
        effects.push({ into: folderId, out: from.folder_id });
      } else {
        steps.push({ type: 'copy', path: source.path, uidvalidity: source.uidvalidity, uid: source.uid, destination });
        effects.push({ into: folderId, out: null });
      }
    }
    for (const l of leaving) {
      steps.push({ type: 'delete', path: l.path, uidvalidity: l.uidvalidity, uid: l.uid });
      effects.push({ into: null, out: l.folder_id });
    }
  }
  return { emailId, steps, effects, wanted };
}

/**
 * After the gateway confirmed: memberships, flags and role in D1, and email.update when anything
 * differs from what D1 had (the sync may have been first). Returns the single-email variant.
 */
export async function applyModify(
  env: Env,
  accountId: string,
  plan: ModifyPlan,
  result: ModifyResult,
  orphanMark: number,
  orphaning: () => void,
): Promise<{ record: EmailRecord; events: OutboxEvent[] }> {
  const db = env.DB;
  // Headers are read for the answer once the rows are written (durable/mailbox-actions.ts).
  const before = await loadEmail(env, plan.emailId, accountId, { headers: false });
  if (!before) throw notFound('Email');
  const statements: D1PreparedStatement[] = [];
  const unread = plan.wanted.unread === undefined ? before.row.unread : plan.wanted.unread ? 1 : 0;
  const starred = plan.wanted.starred === undefined ? before.row.starred : plan.wanted.starred ? 1 : 0;
  let folderIds = [...before.folder_ids];
  plan.effects.forEach((effect, i) => {
    if (effect.out) {
      folderIds = folderIds.filter((id) => id !== effect.out);
      statements.push(
        db.prepare('DELETE FROM email_folders WHERE email_id = ? AND folder_id = ?').bind(plan.emailId, effect.out),
      );
    }
    const uid = result.uids[i];
    if (effect.into && uid) {
      if (!folderIds.includes(effect.into)) folderIds.push(effect.into);
      statements.push(
        db
          .prepare(
            'INSERT OR REPLACE INTO email_folders (email_id, folder_id, account_id, uid, seen, flagged) VALUES (?, ?, ?, ?, ?, ?)',
          )
          .bind(plan.emailId, effect.into, accountId, uid, unread ? 0 : 1, starred),
      );
    }
  });
  // Flags were set on every copy: each copy's own flags say so too.
  if (plan.wanted.unread !== undefined || plan.wanted.starred !== undefined) {
    statements.push(
      db
        .prepare('UPDATE email_folders SET seen = COALESCE(?, seen), flagged = COALESCE(?, flagged) WHERE email_id = ?')
        .bind(
          plan.wanted.unread === undefined ? null : unread ? 0 : 1,
          plan.wanted.starred === undefined ? null : starred,
          plan.emailId,
        ),
    );
  }
  const { results: roles } = await db
    .prepare('SELECT id, role FROM folders WHERE account_id = ?')
    .bind(accountId)
    .all<{ id: string; role: string }>();
  const roleOf = new Map(roles.map((f) => [f.id, f.role]));
  const row: EmailRow = {
    ...before.row,
    unread,
    starred,
    role: folderIds.length ? mainRole(folderIds.map((id) => roleOf.get(id) ?? 'UNKNOWN')) : before.row.role,
  };
  folderIds.sort();
  const changed =
    row.unread !== before.row.unread ||
    row.starred !== before.row.starred ||
    row.role !== before.row.role ||
    folderIds.join() !== [...before.folder_ids].sort().join();
  if (!changed) return { record: before, events: [] };

  row.updated_at = isoNow();
  const after: EmailRecord = { ...before, row, folder_ids: folderIds };
  if (folderIds.length === 0) {
    // Removed from every folder (a sent draft): marked like an expunge seen by the sync; the orphan
    // step deletes it with email.delete (email.draft.delete for a draft) once every folder was read since.
    orphaning();
    statements.push(db.prepare('UPDATE emails SET orphaned_at_ms = ? WHERE id = ?').bind(orphanMark, row.id));
    await db.batch(statements);
    return { record: after, events: [] };
  }
  const event = newEvent('email.update', accountId, emailEventData(after));
  statements.push(
    db
      .prepare('UPDATE emails SET unread = ?, starred = ?, role = ?, updated_at = ? WHERE id = ?')
      .bind(row.unread, row.starred, row.role, row.updated_at, row.id),
    eventStatement(db, event),
  );
  await db.batch(statements);
  return { record: after, events: [event] };
}
