// The account object's queue of sends: bounded (a full queue answers with a wait, before anything
// is stored), and an object that restarts settles what an earlier instance left: a send only
// accepted never reached a gateway (failed: nothing went out), one handed on stays unknown.
import { runInDurableObject } from 'cloudflare:test';
import { expect, it } from 'vitest';
import { recordOutgoing } from '../../worker/send/outgoing.ts';
import { createSyncedAccount } from './sync-helpers.ts';

const DEFAULT_LIMIT = 16;

it('admits up to SEND_QUEUE_LIMIT sends, then answers how long to wait; a released place is free again', async () => {
  const { stub } = await createSyncedAccount();
  const tickets: string[] = [];
  for (let i = 0; i < DEFAULT_LIMIT; i++) {
    const admission = await stub.admitSend();
    expect(admission.ok).toBe(true);
    if (admission.ok) tickets.push(admission.ticket);
  }
  const full = await stub.admitSend();
  expect(full).toMatchObject({ ok: false });
  if (!full.ok) expect(full.retry_after_s).toBeGreaterThan(0);
  await stub.releaseSend(tickets[0]!);
  expect((await stub.admitSend()).ok).toBe(true);
});

it('settles the sends an earlier instance left: accepted ones failed, handed ones still unknown', async () => {
  const { id, stub, db } = await createSyncedAccount();
  for (const messageId of ['<accepted@queue>', '<handed@queue>'])
    await recordOutgoing(db, {
      account_id: id,
      message_id: messageId,
      kind: 'send',
      tracking_id: null,
      tracking_label: null,
      draft_id: null,
      created_at: new Date().toISOString(),
    });
  // What an instance evicted mid-send leaves in its storage; this instance has not looked yet.
  await runInDurableObject(stub, (instance, state) => {
    state.storage.sql.exec(
      `INSERT INTO sends (name, account_id, message_id, state, accepted_ms) VALUES
       ('a1', ?1, '<accepted@queue>', 'accepted', 1), ('h1', ?1, '<handed@queue>', 'handed', 1)`,
      id,
    );
    (instance as unknown as { sends: { recovered: unknown } }).sends.recovered = null;
  });
  expect((await stub.admitSend()).ok).toBe(true);
  const { results } = await db
    .prepare('SELECT message_id, outcome FROM outgoing_messages WHERE account_id = ? ORDER BY message_id')
    .bind(id)
    .all<{ message_id: string; outcome: string }>();
  expect(results).toEqual([
    { message_id: '<accepted@queue>', outcome: 'failed' },
    { message_id: '<handed@queue>', outcome: 'pending' },
  ]);
  const left = await runInDurableObject(stub, (_instance, state) =>
    state.storage.sql.exec('SELECT COUNT(*) AS n FROM sends').one(),
  );
  expect(left.n).toBe(0);
});
