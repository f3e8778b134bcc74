/**
 * Running a batch of the gateway's changes in order, with no poison message: a `messages` change
 * that fails is retried message by message, and a message that keeps failing (several attempts,
 * spread over time, counted in the account object's storage) is recorded with its reason and
 * passed over, so its folder moves on. Anything else that fails fails the batch, and the gateway
 * sends it again; when it keeps failing, the account's `last_error` says which folder and why.
 */
import type { Change } from '../../common/relay.ts';
import type { AccountStore } from '../durable/account-store.ts';
import type { ChangeApplier } from './apply.ts';
import type { InitialSyncFolder } from './initial-sync.ts';
import { folderProblem } from './problems.ts';
import type { ChangeResult, CursorState } from './state.ts';

/** A message is given up on after this many failed attempts, the first at least this long ago. */
const GIVE_UP_ATTEMPTS = 3;
const GIVE_UP_AFTER_MS = 20_000;

export interface RunDeps {
  applier: ChangeApplier;
  store: AccountStore;
  /** Commits one change's result (R2, D1, orphan alarm, events). */
  commit(result: ChangeResult): Promise<void>;
  /** A message was given up on: say so where the account's user and the operator look. */
  skipped(where: { path: string; uid: number }, reason: string): Promise<void>;
}

export async function runChanges(deps: RunDeps, changes: Change[]): Promise<void> {
  for (const change of changes) await runOne(deps, change);
}

async function runOne(deps: RunDeps, change: Change): Promise<void> {
  const { applier, store } = deps;
  const before = snapshot(applier);
  try {
    await deps.commit(await applier.apply(change));
  } catch (err) {
    restore(applier, before);
    if (change.type !== 'messages') return giveUpOrThrow(deps, change, err);
    if (change.messages.length > 1) {
      // Find the message at fault: the others go through on their own.
      for (const message of change.messages) await runOne(deps, { ...change, messages: [message] });
      return;
    }
    const message = change.messages[0]!;
    // A storage hiccup says nothing about the message: the batch is retried, nothing is counted.
    if (isTransient(err)) throw err;
    const reason = describe(err);
    const now = Date.now();
    const failure = store.recordFailure(change.path, change.uidvalidity, message.uid, reason, now);
    if (failure.attempts < GIVE_UP_ATTEMPTS || now - failure.first_failed_at < GIVE_UP_AFTER_MS) throw err;
    store.markSkipped(change.path, change.uidvalidity, message.uid);
    // The folder moves past it: the cursor covers it as if it had been applied.
    const cursor = applier.cursors.get(change.path);
    if (cursor && cursor.uidvalidity === change.uidvalidity && !change.initial_sync)
      cursor.last_uid = Math.max(cursor.last_uid, message.uid);
    await deps.skipped({ path: change.path, uid: message.uid }, reason);
    return;
  }
  // Progress is recorded only after the change's rows are committed.
  store.saveCursors(applier.cursors);
  // A message (or a folder's change) that failed before and went through now is no failure any more.
  if (change.type === 'messages')
    for (const message of change.messages) store.clearFailure(change.path, change.uidvalidity, message.uid);
  else {
    const { path, uidvalidity } = folderOf(change);
    store.clearFailure(path, uidvalidity, FOLDER_CHANGE_UID);
  }
  if (applier.initialSync) store.saveInitialSync(applier.initialSync);
}

/** The failure record of a folder's change that is not a message (messages have UIDs from 1). */
const FOLDER_CHANGE_UID = 0;

/** What a change that is not a message addresses (the folder listing: no folder). */
function folderOf(change: Change): { path: string; uidvalidity: number } {
  return 'path' in change
    ? { path: change.path, uidvalidity: 'uidvalidity' in change ? change.uidvalidity : 0 }
    : { path: '', uidvalidity: 0 };
}

/**
 * A change other than new mail that failed. A platform error is retried (the gateway sends the
 * batch again). One that keeps failing (as long as a message is given) is made visible: the
 * account's `last_error` names its folder and the reason; a piece of a folder's flags, expunges or
 * snapshot is then passed over, so the folder and the rest of the account go on (a flag or an
 * expunge seen later corrects it); any other change keeps being retried.
 */
async function giveUpOrThrow(
  deps: RunDeps,
  change: Exclude<Change, { type: 'messages' }>,
  err: unknown,
): Promise<void> {
  if (isTransient(err)) throw err;
  const { path, uidvalidity } = folderOf(change);
  const reason = describe(err);
  const now = Date.now();
  const failure = deps.store.recordFailure(path, uidvalidity, FOLDER_CHANGE_UID, reason, now);
  if (failure.attempts < GIVE_UP_ATTEMPTS || now - failure.first_failed_at < GIVE_UP_AFTER_MS) throw err;
  const passedOver = change.type === 'flags' || change.type === 'vanished' || change.type === 'snapshot';
  const problem = passedOver
    ? `its ${change.type} could not be applied and were passed over: ${reason}`
    : `a ${change.type} change keeps failing: ${reason}`;
  await deps.commit(folderProblem(deps.applier.state, path || '(listing)', problem));
  if (!passedOver) throw err;
  deps.store.clearFailure(path, uidvalidity, FOLDER_CHANGE_UID);
}

/** The progress a change moves in memory, to be put back when the change does not commit. */
interface Progress {
  cursors: Map<string, CursorState>;
  initialSync: Map<string, InitialSyncFolder> | null;
}

function snapshot(applier: ChangeApplier): Progress {
  const copy = <T extends object>(map: Map<string, T>) => new Map([...map].map(([k, v]) => [k, { ...v }]));
  return { cursors: copy(applier.cursors), initialSync: applier.initialSync && copy(applier.initialSync.folders) };
}

function restore(applier: ChangeApplier, saved: Progress): void {
  const put = <T>(target: Map<string, T>, source: Map<string, T>) => {
    target.clear();
    for (const [k, v] of source) target.set(k, v);
  };
  put(applier.cursors, saved.cursors);
  if (applier.initialSync && saved.initialSync) put(applier.initialSync.folders, saved.initialSync);
}

/**
 * Errors of the platform that pass on their own (D1, R2 or object storage unavailable, overloaded,
 * reset, timed out), told apart from what the message itself causes (a parse, a row too large, a
 * constraint: SQLITE_ errors). Only the latter count towards giving a message up.
 */
export function isTransient(err: unknown): boolean {
  const text = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  if (/SQLITE_(TOOBIG|CONSTRAINT|MISMATCH|RANGE|ERROR)/i.test(text)) return false;
  return /network connection lost|internal error|overloaded|timed? ?out|try again|temporarily|connection reset|unavailable|storage operation|D1_ERROR|D1 DB/i.test(
    text,
  );
}

/** A short, credential-free reason (error messages of D1 and R2 name no secrets). */
function describe(err: unknown): string {
  const text = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  return text.slice(0, 300);
}
