/**
 * Departures: emails that a folder's whole membership left (the folder was deleted on the server, or
 * its re-read after a renumbering did not find them again) and that stay filed in another folder.
 * The unit that removes the memberships queues them in `folder_departures` (memberships.ts
 * `detachMatching`), whatever the folder's size; the account's alarm then refreshes their folders,
 * role and flags, with one email.update each, a bounded step at a time on the change chain. The
 * queue is in the same D1 batch as the removal, so a crash loses none; the folders an email lists
 * are right at once (they are its memberships), its role and flags once its step ran.
 */
import type { Env } from '../env.ts';
import { rowExists } from '../lib/sql.ts';
import { ChangeApplier } from './apply.ts';
import { deleteRows } from './bulk.ts';
import { refreshEmails } from './memberships.ts';
import { emptyResult, endUnit, type AccountContext, type ChangeResult, type CursorState } from './state.ts';

/**
 * Emails refreshed per step: one read of their rows and memberships (REFRESH_CHUNK), one update
 * statement, their outbox rows and the queue's delete: a handful of D1 queries per alarm.
 */
export const DEPARTURE_STEP = 500;

/** Whether the account has departures waiting. */
export const hasDepartures = (env: Env, accountId: string): Promise<boolean> =>
  rowExists(env.DB, 'SELECT 1 FROM folder_departures WHERE account_id = ? LIMIT 1', accountId);

/**
 * One step: up to DEPARTURE_STEP departures refreshed and taken off the queue, as one unit for the
 * caller to commit. `more` says another step is waiting.
 */
export async function departuresStep(
  env: Env,
  account: AccountContext,
  cursors: Map<string, CursorState>,
): Promise<{ result: ChangeResult; more: boolean }> {
  const result = emptyResult();
  const { results } = await env.DB.prepare(
    'SELECT email_id, folder_id FROM folder_departures WHERE account_id = ? LIMIT ?',
  )
    .bind(account.accountId, DEPARTURE_STEP)
    .all<{ email_id: string; folder_id: string }>();
  if (results.length === 0) return { result, more: false };
  const left = new Map<string, string[]>();
  for (const r of results) left.set(r.email_id, [...(left.get(r.email_id) ?? []), r.folder_id]);
  // The account's folders, for the emails' roles.
  const applier = new ChangeApplier(env, account, cursors);
  await applier.loadFolders();
  await refreshEmails(applier.state, [...left.keys()], result, { left }, { unitPerEmail: false });
  result.statements.push(
    ...deleteRows(
      env.DB,
      'folder_departures',
      ['email_id', 'folder_id'],
      results.map((r) => [r.email_id, r.folder_id]),
    ),
  );
  endUnit(result);
  return { result, more: results.length >= DEPARTURE_STEP };
}
