// Several batches of one gateway on their way at once (common/relay.ts ChangesSequence): the
// account's object applies them in the order they were sent, whatever order they arrive in.
import { expect, it } from 'vitest';
import type { Change } from '../../common/relay.ts';
import { createSyncedAccount, messageIn, rawMessage } from './sync-helpers.ts';

const arrivals = (uids: number[]): Change[] => [
  {
    type: 'messages',
    path: 'INBOX',
    uidvalidity: 1,
    messages: uids.map((uid) => messageIn(uid, rawMessage({ subject: `ordered ${uid}` }))),
  },
];

it('applies batch n only after n - 1, answers a repeated one without applying it, refuses a replaced stream', async () => {
  const { id, stub, db } = await createSyncedAccount();
  expect((await stub.acquireLease('gw-1')).granted).toBe(true);
  const subjects = async () =>
    (
      await db.prepare('SELECT subject FROM emails WHERE account_id = ? ORDER BY subject').bind(id).all<{
        subject: string;
      }>()
    ).results.map((r) => r.subject);

  // Batch 1 arrives first: it waits for batch 0, whose messages have lower UIDs (applied after, they
  // would be below the cursor and lost).
  const second = stub.applyChanges('gw-1', arrivals([3, 4]), { stream: 'a', n: 1 });
  await new Promise((r) => setTimeout(r, 50));
  expect(await subjects()).toEqual([]);
  const first = stub.applyChanges('gw-1', arrivals([1, 2]), { stream: 'a', n: 0 });
  expect((await first).ok).toBe(true);
  expect((await second).ok).toBe(true);
  expect(await subjects()).toEqual(['ordered 1', 'ordered 2', 'ordered 3', 'ordered 4']);

  // Batch 0 again (its answer was lost): answered with the cursors, nothing applied twice.
  const again = await stub.applyChanges('gw-1', arrivals([1, 2]), { stream: 'a', n: 0 });
  expect(again).toMatchObject({ ok: true });
  const news = await db
    .prepare("SELECT COUNT(*) AS n FROM events WHERE account_id = ? AND type = 'email.new'")
    .bind(id)
    .first<{ n: number }>();
  expect(news?.n).toBe(4);

  // A new stream replaces the old one: what is left of the old one is refused at once.
  expect((await stub.applyChanges('gw-1', arrivals([5]), { stream: 'b', n: 0 })).ok).toBe(true);
  expect(await stub.applyChanges('gw-1', arrivals([6]), { stream: 'a', n: 2 })).toMatchObject({
    ok: false,
    out_of_order: expect.any(String),
  });
  expect(await subjects()).toEqual(['ordered 1', 'ordered 2', 'ordered 3', 'ordered 4', 'ordered 5']);
});

it('refuses a batch of a gateway session that has ended, even the first of a stream', async () => {
  const { id, stub, db } = await createSyncedAccount();
  expect((await stub.acquireLease('gw-1')).granted).toBe(true);
  const count = async () =>
    (await db.prepare('SELECT COUNT(*) AS n FROM emails WHERE account_id = ?').bind(id).first<{ n: number }>())?.n;

  expect((await stub.applyChanges('gw-1', arrivals([1]), { stream: 'old', n: 0, session: 100 })).ok).toBe(true);
  // The gateway's next session (a later epoch) takes over with a stream of its own.
  expect((await stub.applyChanges('gw-1', arrivals([2]), { stream: 'new', n: 0, session: 200 })).ok).toBe(true);
  // A late batch of the ended session: refused, whether it continues its stream or starts one.
  for (const late of [
    { stream: 'old', n: 1, session: 100 },
    { stream: 'older', n: 0, session: 150 },
  ])
    expect(await stub.applyChanges('gw-1', arrivals([3]), late)).toMatchObject({
      ok: false,
      out_of_order: expect.any(String),
    });
  expect(await count()).toBe(2);
  // The current session goes on; a later one takes over again.
  expect((await stub.applyChanges('gw-1', arrivals([4]), { stream: 'new', n: 1, session: 200 })).ok).toBe(true);
  expect((await stub.applyChanges('gw-1', arrivals([5]), { stream: 'next', n: 0, session: 300 })).ok).toBe(true);
  expect(await count()).toBe(4);
});
