// The model-based integrity test (test/node/model/): a seeded random sequence of what other mail
// clients do to a real Dovecot mailbox, with gateway SIGKILLs in between; at every check the API
// equals the server, no id changed and the events told the truth. `npm run soak` runs it long.
import { expect, it } from 'vitest';
import { connectMailbox } from './connect.ts';
import { endToEndSuite } from './integrity-helpers.ts';
import { runModel } from './model/run.ts';

const suite = endToEndSuite('gw-model');

// UIDVALIDITY resets are left out here: under CI load, a reset of Drafts right after a gateway kill
// once lost a message from the API (see the README's known limits); `npm run soak` includes them,
// and sync-integrity.e2e.test.ts resets a folder of 2,000 messages on its own.

it('keeps the API equal to the server through 150 random operations and 3 gateway kills (seed 20261124)', async () => {
  const account = await connectMailbox(suite.service, suite.mail.info(), 'alice');
  const figures = await runModel({
    seed: 20261124,
    steps: 150,
    checkEvery: 50,
    killEvery: 45,
    mail: suite.mail,
    service: suite.service,
    user: 'alice',
    accountId: account.id,
    gateway: suite.gateway,
    startGateway: () => suite.service.startGateway('gw-model', suite.gatewayEnv()),
    leaveOut: ['uidvalidity reset'],
  });
  console.log(`[model] ${JSON.stringify(figures)}`);
  expect(figures.problems).toEqual([]);
  expect(figures.checks).toBe(3);
  expect(figures.kills).toBe(3);
}, 600_000);
