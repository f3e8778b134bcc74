/**
 * The end of a pass over one folder (gateway/folder-pass.ts): what it found besides new mail (flags,
 * expunges, the UID snapshot), the new cursor, and, while the Worker waits for it, that the folder was
 * read through (gateway/evidence.ts). A large folder's findings go in pieces of `MAX_CHANGE_UIDS`, a
 * batch each, so that the Worker applies each within one invocation's limits.
 */
import { inPieces, snapshotPieces } from '../common/relay-pieces.ts';
import type { Change, FolderCursor } from '../common/relay.ts';
import type { Evidence } from './evidence.ts';
import type { FolderChanges, PassTail } from './folder-changes.ts';

/** What sending a tail needs of the session (a part of folder-pass.ts `PassHost`). */
export interface TailHost {
  readonly cursors: Map<string, FolderCursor>;
  readonly changes: FolderChanges;
  readonly evidence: Evidence;
  send(changes: Change[]): Promise<void>;
}

/** How far a fetch of new mail got: the folder's last UID, and whether it relayed everything up to it. */
export interface ReadThrough {
  lastUid: number;
  complete: boolean;
}

/** Sends the tail of a pass that began with the orphan mark `started`; the last piece goes with the cursor. */
export async function sendTail(
  host: TailHost,
  path: string,
  tail: PassTail,
  { lastUid, complete }: ReadThrough,
  started: number,
): Promise<void> {
  const { uidvalidity, highest_modseq } = tail.status;
  const pieces: Change[] = [
    ...inPieces(tail.flags).map((updates): Change => ({ type: 'flags', path, uidvalidity, updates })),
    ...inPieces(tail.vanished).map((uids): Change => ({ type: 'vanished', path, uidvalidity, uids })),
    ...(tail.snapshot ? snapshotPieces(path, uidvalidity, tail.snapshot, lastUid) : []),
  ];
  const changes: Change[] = pieces.length ? [pieces.pop()!] : [];
  for (const piece of pieces) await host.send([piece]);
  const cursor = host.cursors.get(path);
  const moved =
    !cursor ||
    cursor.resync === true ||
    cursor.uidvalidity !== uidvalidity ||
    cursor.last_uid !== lastUid ||
    cursor.highest_modseq !== highest_modseq;
  if (changes.length || pieces.length || moved)
    changes.push({ type: 'cursor', path, uidvalidity, last_uid: lastUid, highest_modseq });
  const passed = complete ? host.evidence.report(path, uidvalidity, started) : null;
  if (passed) changes.push(passed);
  await host.send(changes);
  host.changes.relayed(path, tail);
}

/** Sends a snapshot of the UIDs up to `upTo` (ascending) in pieces, a batch each. */
export async function sendSnapshot(host: TailHost, path: string, uidvalidity: number, uids: number[], upTo: number) {
  for (const piece of snapshotPieces(path, uidvalidity, uids, upTo)) await host.send([piece]);
}

type Hint = { path: string; uidvalidity: number; uids: number[] };

/** Expunges still to be reported, one entry per folder and numbering (UIDs ascending, once each). */
export function mergeHints(hints: Hint[]): Hint[] {
  const merged = new Map<string, Hint & { set: Set<number> }>();
  for (const hint of hints) {
    const key = `${hint.uidvalidity}:${hint.path}`;
    const entry = merged.get(key) ?? { ...hint, uids: [], set: new Set<number>() };
    for (const uid of hint.uids) entry.set.add(uid);
    merged.set(key, entry);
  }
  return [...merged.values()].map(({ path, uidvalidity, set }) => ({
    path,
    uidvalidity,
    uids: [...set].sort((a, b) => a - b),
  }));
}
