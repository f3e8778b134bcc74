// The model-based integrity test (test/node/model/): a seeded random sequence of what other mail
// clients do to a real Dovecot mailbox, with gateway SIGKILLs in between; at every check the API
// equals the server, no id changed and the events told the truth. `npm run soak` runs it long.
import { expect, it } from 'vitest';
import { connectMailbox } from './connect.ts';
import { endToEndSuite } from './integrity-helpers.ts';
import { runModel } from './model/run.ts';

const suite = endToEndSuite('gw-model');

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
    // Minutes each: `npm run soak` has them.
    leaveOut: ['thousands', 'large message'],
  });
  console.log(`[model] ${JSON.stringify(figures)}`);
  expect(figures.problems).toEqual([]);
  expect(figures.gaveUp).toBeUndefined();
  expect(figures.checks).toBe(3);
  // Every 45 steps, and after the renumbering of a folder being read again.
  expect(figures.kills).toBeGreaterThanOrEqual(3);
}, 600_000);
