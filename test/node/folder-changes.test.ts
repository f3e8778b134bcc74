// What a pass reports as expunged without QRESYNC (gateway/folder-changes.ts): UIDs that left since
// the last snapshot of the same numbering, never UIDs of an earlier UIDVALIDITY (a folder deleted and
// created again under its path, or renumbered, holds other messages under those numbers).
import { describe, expect, it } from 'vitest';
import { FolderChanges, type PassTail } from '../../gateway/folder-changes.ts';

const features = () => ({ condstore: false, qresync: false, gmail: false, move: true });

function tail(uidvalidity: number, snapshot: number[]): PassTail {
  return {
    flags: [],
    vanished: [],
    snapshot,
    removed: false,
    status: { uidvalidity, uidnext: 10, highest_modseq: null, exact: true },
    digests: null,
  };
}

describe('FolderChanges.gone', () => {
  it('reports the UIDs gone since the last snapshot of the same UIDVALIDITY', () => {
    const changes = new FolderChanges(features, 100);
    changes.relayed('Travel', tail(7, [1, 2, 3, 4]));
    expect(changes.gone('Travel', tail(7, [1, 3]))).toEqual([2, 4]);
  });

  it('reports nothing against a snapshot of another UIDVALIDITY', () => {
    const changes = new FolderChanges(features, 100);
    changes.relayed('Travel', tail(7, [1, 2, 3, 4]));
    // Travel deleted and created again: its UIDs 1 and 2 are new messages, 3 and 4 never existed in it.
    expect(changes.gone('Travel', tail(8, [1, 2]))).toEqual([]);
  });

  it('counts mail a catch-up relayed into the folder: it is seen leaving', () => {
    const changes = new FolderChanges(features, 100);
    changes.relayed('Travel', tail(7, [1, 2]));
    changes.caughtUp('Travel', 7, [5, 6]);
    // Relayed under another numbering: not this folder's messages.
    changes.caughtUp('Travel', 8, [9]);
    expect(changes.gone('Travel', tail(7, [1, 6, 9]))).toEqual([2, 5]);
  });

  it('forgets the snapshot when the Worker says the folder was renumbered', () => {
    const changes = new FolderChanges(features, 100);
    changes.relayed('Travel', tail(7, [1, 2, 3]));
    changes.renumbered('Travel');
    expect(changes.gone('Travel', tail(7, [1]))).toEqual([]);
  });
});
