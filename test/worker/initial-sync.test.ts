// The initial sync on the Worker's side: the plan a lease carries, which pulled messages enter, and
// the account's initial_sync field with its events.
import { describe, expect, it } from 'vitest';
import type { Change } from '../../common/relay.ts';
import { api } from './helpers.ts';
import { createSyncedAccount, messageIn, outbox, rawMessage, STANDARD_FOLDERS } from './sync-helpers.ts';

const DAY = 24 * 3600 * 1000;

/** An account connected with a 7-day initial sync while INBOX held UIDs 1..9. */
async function accountWithInitialSync() {
  const folders = STANDARD_FOLDERS(10);
  const account = await createSyncedAccount(undefined, folders);
  const since = Date.now() - 7 * DAY;
  // Connecting again the way POST /auth/intent does with initial_sync_enable.
  await account.stub.initialize({
    account_id: account.id,
    email: account.email,
    user_id: account.email,
    connected_at_ms: Date.now(),
    folders,
    initial_sync_since_ms: since,
  });
  expect((await account.stub.acquireLease('gw-1')).granted).toBe(true);
  const apply = async (...changes: Change[]) => {
    const result = await account.stub.applyChanges('gw-1', changes);
    expect(result.ok).toBe(true);
    return result.ok ? result.value.cursors : [];
  };
  return { ...account, since, apply };
}

const pulled = (uid: number, subject: string, at: number) => ({
  ...messageIn(uid, rawMessage({ subject })),
  internal_date: new Date(at).toISOString(),
});

describe('initial sync', () => {
  it('hands the gateway what each folder held at connect, and only that', async () => {
    const { stub, since } = await accountWithInitialSync();
    expect(await stub.initialSyncPlan()).toEqual({
      since: new Date(since).toISOString(),
      folders: [{ path: 'INBOX', uidvalidity: 1, below_uid: 10 }],
    });
  });

  it('takes pulled mail inside the window and below the baseline, leaving the cursor alone', async () => {
    const { id, stub, since, apply } = await accountWithInitialSync();
    const cursors = await apply({
      type: 'messages',
      path: 'INBOX',
      uidvalidity: 1,
      initial_sync: true,
      messages: [
        pulled(8, 'recent', since + DAY),
        pulled(5, 'too old', since - 1000),
        pulled(12, 'above the baseline', since + DAY),
      ],
    });
    expect(cursors.find((c) => c.path === 'INBOX')?.last_uid).toBe(9);
    expect((await api('GET', `/emails?account_id=${id}`)).body.data.map((e: any) => e.subject)).toEqual(['recent']);
    expect((await stub.initialSyncPlan())?.folders).toEqual([{ path: 'INBOX', uidvalidity: 1, below_uid: 5 }]);
    // UID 12 is the live sync's to report, as new mail.
    await apply({
      type: 'messages',
      path: 'INBOX',
      uidvalidity: 1,
      messages: [pulled(12, 'above the baseline', Date.now())],
    });
    expect((await api('GET', `/emails?account_id=${id}`)).body.data.map((e: any) => e.subject).sort()).toEqual([
      'above the baseline',
      'recent',
    ]);
  });

  it('moves the account through running and completed once, each with its event', async () => {
    const { id, stub, since, apply } = await accountWithInitialSync();
    const state = async () => (await api('GET', `/accounts/${id}`)).body.initial_sync;
    expect(await state()).toBe('none');
    await apply({ type: 'initial_sync', state: 'completed', error: null }); // not running yet: ignored
    expect(await state()).toBe('none');
    await apply({ type: 'initial_sync', state: 'running', error: null });
    await apply({ type: 'initial_sync', state: 'running', error: null }); // a restarted gateway
    expect(await state()).toBe('running');
    await apply({ type: 'initial_sync', state: 'completed', error: null });
    expect(await state()).toBe('completed');
    expect(await stub.initialSyncPlan()).toBeUndefined();
    const events = (await outbox(id)).filter((e) => e.type.startsWith('account.initial_sync.'));
    expect(events.map((e) => [e.type, e.data.initial_sync])).toEqual([
      ['account.initial_sync.running', 'running'],
      ['account.initial_sync.completed', 'completed'],
    ]);
    // After completion, pulled mail is no longer taken.
    await apply({
      type: 'messages',
      path: 'INBOX',
      uidvalidity: 1,
      initial_sync: true,
      messages: [pulled(3, 'late', since + DAY)],
    });
    expect((await api('GET', `/emails?account_id=${id}`)).body.data).toEqual([]);
  });
});
