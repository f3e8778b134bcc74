/**
 * How the gateway cuts a large finding into changes the Worker applies one invocation each
 * (`MAX_CHANGE_UIDS`): shared, so that tests of the Worker feed it exactly what a gateway sends.
 */
import { MAX_CHANGE_UIDS } from './relay-limits.ts';
import type { Change } from './relay.ts';

/**
 * A snapshot of the UIDs up to `upTo` (ascending) as pieces whose ranges follow one another from
 * UID 1 to `upTo`: each says what the folder holds in its range, and nothing beyond.
 */
export function snapshotPieces(path: string, uidvalidity: number, uids: number[], upTo: number): Change[] {
  const parts = inPieces(uids);
  if (parts.length === 0) parts.push([]);
  let from = 1;
  return parts.map((part, i) => {
    const end = i === parts.length - 1 ? Math.max(upTo, part.at(-1) ?? 0) : part.at(-1)!;
    const piece: Change = { type: 'snapshot', path, uidvalidity, uids: part, from_uid: from, up_to: end };
    from = end + 1;
    return piece;
  });
}

export function inPieces<T>(items: T[]): T[][] {
  const pieces: T[][] = [];
  for (let i = 0; i < items.length; i += MAX_CHANGE_UIDS) pieces.push(items.slice(i, i + MAX_CHANGE_UIDS));
  return pieces;
}
