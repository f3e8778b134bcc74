// Staged sources (large messages the gateway uploads before the change naming them) are deleted
// only after a grace, from the account object's alarm: a change still on its way may name the same
// source after another change passed it over.
import { runDurableObjectAlarm, runInDurableObject } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { expect, it } from 'vitest';
import type { MessageIn } from '../../common/relay.ts';
import { blobKeys } from '../../worker/emails/store.ts';
import { api } from './helpers.ts';
import { createSyncedAccount, messageIn, rawMessage } from './sync-helpers.ts';

async function leased() {
  const account = await createSyncedAccount();
  expect((await account.stub.acquireLease('gw-1')).granted).toBe(true);
  return account;
}

/** A source staged in R2 as the gateway would (named by its SHA-256), and its message naming it. */
async function staged(accountId: string, subject: string) {
  const raw = rawMessage({ subject });
  const bytes = new TextEncoder().encode(raw);
  const sha = [...new Uint8Array(await crypto.subtle.digest('SHA-256', bytes))]
    .map((b) => b.toString(16).padStart(2, '0'))
    .join('');
  const key = blobKeys.staged(accountId, sha);
  await env.BLOBS.put(key, bytes);
  const message = (uid: number): MessageIn => ({ ...messageIn(uid, raw), raw: '', staged: sha });
  return { raw, key, message };
}

const inR2 = async (key: string) => (await env.BLOBS.head(key)) !== null;

/** Lets the grace of the recorded releases run out, then runs the alarm. */
async function endStagedGrace(stub: DurableObjectStub): Promise<void> {
  await runInDurableObject(stub, (_instance, state) => {
    state.storage.sql.exec('UPDATE staged_releases SET due_ms = 0');
  });
  await runDurableObjectAlarm(stub);
}

it('keeps a staged source one change passed over for a later change that names it', async () => {
  const account = await leased();
  const source = await staged(account.id, 'large and twice');
  // UIDs up to 5 were covered already: a change relaying UID 3 again passes its source over.
  await account.stub.applyChanges('gw-1', [
    { type: 'cursor', path: 'INBOX', uidvalidity: 1, last_uid: 5, highest_modseq: '1' },
    { type: 'messages', path: 'INBOX', uidvalidity: 1, messages: [source.message(3)] },
  ]);
  expect(await inR2(source.key)).toBe(true);
  // The identical message under a new UID, in a change that was already on its way.
  await account.stub.applyChanges('gw-1', [
    { type: 'messages', path: 'INBOX', uidvalidity: 1, messages: [source.message(6)] },
  ]);
  const listed = (await api('GET', `/emails?account_id=${account.id}`)).body.data;
  expect(listed.map((e: { subject: string }) => e.subject)).toEqual(['large and twice']);
  const raw = await api('GET', `/emails/${listed[0].id}/raw`);
  expect(raw.status).toBe(200);
  // After the grace the source stays: an email uses it.
  await endStagedGrace(account.stub);
  expect(await inR2(source.key)).toBe(true);
});

it('deletes a passed-over staged source after the grace, unless it was uploaded again since', async () => {
  const account = await leased();
  const unused = await staged(account.id, 'never used');
  const again = await staged(account.id, 'uploaded again');
  await account.stub.applyChanges('gw-1', [
    { type: 'cursor', path: 'INBOX', uidvalidity: 1, last_uid: 5, highest_modseq: '1' },
    { type: 'messages', path: 'INBOX', uidvalidity: 1, messages: [unused.message(2), again.message(3)] },
  ]);
  // The grace has not run out: the alarm (set for it) deletes nothing yet.
  await runDurableObjectAlarm(account.stub);
  expect([await inR2(unused.key), await inR2(again.key)]).toEqual([true, true]);

  // A new pass of the gateway uploads one of them again, after the release was recorded (a few ms
  // later, so its upload time is after the record's).
  await new Promise((resolve) => setTimeout(resolve, 5));
  await env.BLOBS.put(again.key, new TextEncoder().encode(again.raw));
  await endStagedGrace(account.stub);
  expect([await inR2(unused.key), await inR2(again.key)]).toEqual([false, true]);
  const left = await runInDurableObject(account.stub, (_instance, state) =>
    state.storage.sql.exec('SELECT COUNT(*) AS n FROM staged_releases').one(),
  );
  expect(left).toEqual({ n: 0 });
});
