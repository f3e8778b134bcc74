// `npm start` runs the gateway too and passes its environment on: with the test CA given only
// through NODE_EXTRA_CA_CERTS, connecting a mailbox over verified TLS works, and mail syncs.
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { deliver, findUser } from '../mailserver/client.ts';
import { eventually, startService, type Service } from './service.ts';

const mail = inject('mailserver');
let service: Service;

beforeAll(async () => {
  service = await startService({ gatewayEnv: { NODE_EXTRA_CA_CERTS: mail.caFile, GATEWAY_ID: 'npm-start-gateway' } });
});

afterAll(async () => {
  await service?.stop();
});

it('connects a mailbox through the gateway npm start launched, and syncs its mail', async () => {
  const dave = findUser(mail, 'dave');
  const account = await eventually(async () => {
    const res = await service.api('POST', '/auth/intent', {
      provider: 'imap', email: dave.email, password: dave.password, imap_user: dave.user,
      imap_host: mail.host, imap_port: mail.imapPort, imap_encryption: 'SSL',
      smtp_host: mail.host, smtp_port: mail.smtpPort, smtp_encryption: 'STARTTLS',
    });
    return res.status === 200 ? res.body : res.body?.detail?.includes('No mail gateway') ? null : Promise.reject(new Error(JSON.stringify(res.body)));
  }, { what: 'the gateway npm start launched', timeoutMs: 60_000, intervalMs: 500 });
  expect(account).toMatchObject({ object: 'Account', status: 'running' });
  await deliver(mail, { from: 'someone@remote.test', to: dave.email, subject: 'via npm start', text: 'hello' });
  await eventually(async () => (await service.api('GET', `/emails?account_id=${account.id}`)).body.data.length === 1, { what: 'the synced email' });
});
