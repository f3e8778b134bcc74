// End to end: rotating CREDENTIALS_KEY (docs/security.md). An account connected under key A keeps
// syncing after `npm start` is restarted, on the same local state, with CREDENTIALS_KEY=B and
// CREDENTIALS_KEY_PREVIOUS=A: a new gateway leases it (the lease opens the passwords sealed with A),
// new mail reaches the API, and the stored passwords are sealed with B.
import { createHash, randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { startMailServer, type MailServer } from '../mailserver/mailserver.ts';
import { connectMailbox } from './connect.ts';
import { dumpLogsOnFailure, eventually, startService, type Service } from './service.ts';

const KEY_A = randomBytes(32).toString('base64');
const KEY_B = randomBytes(32).toString('base64');

let mail: MailServer;
let service: Service;

// The project's hookTimeout (300 s): `npm start` (more so with mail shards) may take minutes on a loaded machine.
beforeAll(async () => {
  mail = await startMailServer();
  service = await startService({ workerEnv: { CREDENTIALS_KEY: KEY_A } });
});
afterAll(async () => {
  await service?.stop();
  await mail?.stop();
});
afterEach((ctx) => dumpLogsOnFailure(ctx, service));

/** The key's public name sealed values carry (worker/lib/crypto.ts): its SHA-256, first 8 hex digits. */
const keyId = (key: string) => createHash('sha256').update(Buffer.from(key, 'base64')).digest('hex').slice(0, 8);

const sealedWith = (accountId: string) =>
  service
    .query<{ credentials: string }>('SELECT credentials FROM accounts WHERE id = ?', accountId)[0]!
    .credentials.split('.')
    .slice(0, 2)
    .join('.');

const subjects = async (accountId: string) => (await service.listEmails(accountId)).map((e) => e.subject as string);

it('accounts sealed with the old key keep syncing with CREDENTIALS_KEY_PREVIOUS and are sealed with the new one', async () => {
  const first = service.startGateway('gw-key-a', { NODE_EXTRA_CA_CERTS: mail.caFile });
  const alice = await connectMailbox(service, mail, 'alice');
  expect(sealedWith(alice.id)).toBe(`v2.${keyId(KEY_A)}`);
  await mail.deliver({
    from: 'before@remote.test',
    to: mail.users[0]!.email,
    subject: 'before the rotation',
    text: 'a',
  });
  await eventually(async () => (await subjects(alice.id)).includes('before the rotation'), {
    what: 'mail before the rotation',
  });

  // The gateway lets its leases go; the Worker comes back with the new key and the old one as previous.
  await first.kill('SIGTERM');
  await service.restartWorker({ CREDENTIALS_KEY: KEY_B, CREDENTIALS_KEY_PREVIOUS: KEY_A });
  expect(sealedWith(alice.id)).toBe(`v2.${keyId(KEY_A)}`);

  // A new gateway gets the passwords through its lease and syncs what arrives now.
  service.startGateway('gw-key-b', { NODE_EXTRA_CA_CERTS: mail.caFile });
  await mail.deliver({ from: 'after@remote.test', to: mail.users[0]!.email, subject: 'after the rotation', text: 'b' });
  await eventually(async () => (await subjects(alice.id)).includes('after the rotation'), {
    what: 'mail after the rotation',
    timeoutMs: 90_000,
    intervalMs: 250,
  });
  expect(service.query('SELECT gateway_id FROM accounts WHERE id = ?', alice.id)[0]).toEqual({
    gateway_id: 'gw-key-b',
  });
  expect((await service.api('GET', `/accounts/${alice.id}`)).body).toMatchObject({
    status: 'running',
    last_error: null,
  });
  expect(sealedWith(alice.id)).toBe(`v2.${keyId(KEY_B)}`);
}, 300_000);
