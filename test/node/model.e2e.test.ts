// The model-based integrity test (test/node/model/): a seeded random sequence of what other mail
// clients do to a real Dovecot mailbox, with gateway SIGKILLs in between; at every check the API
// equals the server, no id changed and the events told the truth. `npm run soak` runs it long.
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import type { MailServer } from '../mailserver/mailserver.ts';
import { connectMailbox } from './connect.ts';
import { runModel } from './model/run.ts';
import { dumpLogsOnFailure, startEndToEnd, stopEndToEnd, type GatewayProcess, type Service } from './service.ts';

let mail: MailServer;
let service: Service;
let gateway: GatewayProcess;
const GATEWAY_ENV = () => ({ NODE_EXTRA_CA_CERTS: mail.caFile, GATEWAY_POLL_INTERVAL_MS: '1000' });

beforeAll(async () => {
  ({ mail, service, gateway } = await startEndToEnd('gw-model', { GATEWAY_POLL_INTERVAL_MS: '1000' }));
}, 120_000);

afterEach((ctx) => dumpLogsOnFailure(ctx, service));

afterAll(() => stopEndToEnd({ mail, service }));

it('keeps the API equal to the server through 150 random operations and 3 gateway kills (seed 20261124)', async () => {
  const account = await connectMailbox(service, mail.info(), 'alice');
  const figures = await runModel({
    seed: 20261124,
    steps: 150,
    checkEvery: 50,
    killEvery: 45,
    mail,
    service,
    user: 'alice',
    accountId: account.id,
    gateway,
    startGateway: () => service.startGateway('gw-model', GATEWAY_ENV()),
  });
  console.log(`[model] ${JSON.stringify(figures)}`);
  expect(figures.problems).toEqual([]);
  expect(figures.checks).toBe(3);
  expect(figures.kills).toBe(3);
}, 600_000);
