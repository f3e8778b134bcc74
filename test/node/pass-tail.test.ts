// The end of a pass (gateway/pass-tail.ts): a large folder's flags, expunges and snapshot go in pieces
// of MAX_CHANGE_UIDS, a batch each, whose snapshot ranges follow one another without gaps up to the
// UID the pass read to; the cursor goes with the last piece; `passed` is reported only for a folder
// read through while the Worker waits for evidence (gateway/evidence.ts).
import { describe, expect, it } from 'vitest';
import { MAX_CHANGE_UIDS } from '../../common/relay-limits.ts';
import type { Change, FolderCursor } from '../../common/relay.ts';
import { Evidence } from '../../gateway/evidence.ts';
import { FolderChanges, type PassTail } from '../../gateway/folder-changes.ts';
import { sendTail, type TailHost } from '../../gateway/pass-tail.ts';

function host(waiting: boolean): TailHost & { batches: Change[][] } {
  const batches: Change[][] = [];
  return {
    batches,
    cursors: new Map<string, FolderCursor>(),
    changes: new FolderChanges(() => ({ condstore: false, qresync: false, gmail: false, move: true }), 100),
    evidence: new Evidence({ mark: 42, waiting }),
    async send(changes) {
      if (changes.length) batches.push(changes);
    },
  };
}

function tail(flags: number, snapshot: number[]): PassTail {
  return {
    flags: Array.from({ length: flags }, (_, k) => ({ uid: k + 1, flags: ['\\Seen'] })),
    vanished: [],
    snapshot,
    removed: false,
    status: { uidvalidity: 9, uidnext: 5_001, highest_modseq: null, exact: true },
    digests: null,
  };
}

describe('sendTail', () => {
  it('splits a large folder into batches of MAX_CHANGE_UIDS whose snapshot ranges cover 1..last UID', async () => {
    const h = host(false);
    const present = Array.from({ length: 4_500 }, (_, k) => k + 1).filter((uid) => uid % 9 !== 0);
    await sendTail(h, 'Big', tail(5_000, present), { lastUid: 5_000, complete: true }, 42);
    for (const batch of h.batches.slice(0, -1)) expect(batch).toHaveLength(1);
    const changes = h.batches.flat();
    const flags = changes.filter((c) => c.type === 'flags');
    expect(flags.map((c) => c.updates.length)).toEqual([2_000, 2_000, 1_000]);
    const snapshots = changes.filter((c) => c.type === 'snapshot');
    expect(snapshots.every((c) => c.uids.length <= MAX_CHANGE_UIDS)).toBe(true);
    expect(snapshots.flatMap((c) => c.uids)).toEqual(present);
    let next = 1;
    for (const piece of snapshots) {
      expect(piece.from_uid).toBe(next);
      expect(piece.uids.every((uid) => uid >= piece.from_uid! && uid <= piece.up_to!)).toBe(true);
      next = piece.up_to! + 1;
    }
    expect(next).toBe(5_001);
    expect(h.batches.at(-1)?.at(-1)).toMatchObject({ type: 'cursor', last_uid: 5_000 });
    expect(changes.some((c) => c.type === 'passed')).toBe(false);
  });

  it('reports a folder read through while the Worker waits, and never one that was not', async () => {
    const waiting = host(true);
    await sendTail(waiting, 'INBOX', tail(0, []), { lastUid: 3, complete: false }, 42);
    expect(waiting.batches.flat().some((c) => c.type === 'passed')).toBe(false);
    expect(waiting.evidence.needs('INBOX')).toBe(true);
    await sendTail(waiting, 'INBOX', tail(0, []), { lastUid: 3, complete: true }, 42);
    expect(waiting.batches.flat().filter((c) => c.type === 'passed')).toEqual([
      { type: 'passed', listed: 0, folders: [{ path: 'INBOX', uidvalidity: 9, started: 42 }] },
    ]);
    expect(waiting.evidence.needs('INBOX')).toBe(false);
  });
});
