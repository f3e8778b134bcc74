// `npm start` runs the gateway too and passes its environment on: with the test CA given only
// through NODE_EXTRA_CA_CERTS, connecting a mailbox over verified TLS works, and mail syncs.
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { deliver, findUser } from '../mailserver/client.ts';
import { connectMailbox } from './connect.ts';
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
  const account = await connectMailbox(service, mail, 'dave');
  expect(service.query('SELECT gateway_id FROM accounts WHERE id = ?', account.id)).toEqual([
    { gateway_id: 'npm-start-gateway' },
  ]);
  await deliver(mail, {
    from: 'someone@remote.test',
    to: findUser(mail, 'dave').email,
    subject: 'via npm start',
    text: 'hello',
  });
  await eventually(async () => (await service.api('GET', `/emails?account_id=${account.id}`)).body.data.length === 1, {
    what: 'the synced email',
  });
});
