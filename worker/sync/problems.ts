/**
 * What the account's `last_error` says about a folder that cannot make progress, written in the
 * change's own D1 batch: a folder the server refuses (the gateway's `folder_problem` change), or a
 * change of a folder the Worker gave up on after it kept failing (sync/run-changes.ts). The rest of
 * the account syncs on; the message names the folder, so that it is cleared when that folder is
 * read again.
 */
import { isoNow } from '../lib/time.ts';
import { emptyResult, type ChangeResult, type SyncState } from './state.ts';
import { directoryDb } from '../shards/registry.ts';

const prefix = (path: string) => `folder ${path}: `;

/** Sets (or, `problem` null, clears when it is this folder's) the account's `last_error`. */
export function folderProblem(state: SyncState, path: string, problem: string | null): ChangeResult {
  const result = emptyResult();
  const db = directoryDb(state.env);
  const accountId = state.account.accountId;
  const head = prefix(path);
  result.directory.push(
    problem === null
      ? db
          .prepare(
            'UPDATE accounts SET last_error = NULL, updated_at = ? WHERE id = ? AND substr(last_error, 1, length(?)) = ?',
          )
          .bind(isoNow(), accountId, head, head)
      : db
          .prepare('UPDATE accounts SET last_error = ?, updated_at = ? WHERE id = ?')
          .bind(`${head}${problem}`.slice(0, 1000), isoNow(), accountId),
  );
  return result;
}
