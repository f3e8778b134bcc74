// The gateway sends each outgoing message at most once, however often the Worker asks, and reports
// an outcome only when it is known (gateway/sends.ts).
import { describe, expect, it } from 'vitest';
import type { OutgoingMessage, SendOutcome } from '../../common/relay.ts';
import { GatewayError } from '../../gateway/errors.ts';
import { createLogger } from '../../gateway/log.ts';
import type { MailboxCommands } from '../../gateway/mailbox.ts';
import { OutgoingSends } from '../../gateway/sends.ts';
import type { WorkerClient } from '../../gateway/worker-client.ts';

function setup(sendImpl: () => Promise<{ message_id: string }>) {
  const reports: SendOutcome[] = [];
  let sends = 0;
  const worker = {
    outgoing: async () => ({ message_id: '<m1@example.test>' }) as OutgoingMessage,
    sendOutcome: async (_account: string, outcome: SendOutcome) => {
      reports.push(outcome);
    },
  } as unknown as WorkerClient;
  const commands = {
    send: async () => {
      sends += 1;
      return sendImpl();
    },
  } as unknown as MailboxCommands;
  const runner = new OutgoingSends(worker, createLogger('error'));
  const request = { op: 'send', account_id: 'acc_1', mode: 'send', key: 'k'.repeat(20), append_to: null } as const;
  return { runner, request, commands, reports, sends: () => sends };
}

describe('OutgoingSends', () => {
  it('sends a message once when asked twice, and reports it sent', async () => {
    const t = setup(async () => {
      await new Promise((r) => setTimeout(r, 50));
      return { message_id: '<m1@example.test>' };
    });
    const [a, b] = await Promise.all([
      t.runner.run(t.request, () => t.commands),
      t.runner.run(t.request, () => t.commands),
    ]);
    expect(await t.runner.run(t.request, () => t.commands)).toEqual(a);
    expect(b).toEqual(a);
    expect(t.sends()).toBe(1);
    await new Promise((r) => setTimeout(r, 10));
    expect(t.reports).toEqual([{ message_id: '<m1@example.test>', sent: true, detail: null }]);
  });

  it('reports a refusal as not sent, and a link broken mid-transaction not at all', async () => {
    const refused = setup(async () => {
      throw new GatewayError('provider_rejected', 'SMTP server refused the message: 554');
    });
    await expect(refused.runner.run(refused.request, () => refused.commands)).rejects.toThrow(/554/);
    await new Promise((r) => setTimeout(r, 10));
    expect(refused.reports).toEqual([
      { message_id: '<m1@example.test>', sent: false, detail: 'SMTP server refused the message: 554' },
    ]);

    const broken = setup(async () => {
      const err = new GatewayError('provider_error', 'SMTP connection lost');
      err.mayHaveSent = true;
      throw err;
    });
    await expect(broken.runner.run(broken.request, () => broken.commands)).rejects.toThrow(/lost/);
    // A repeat is answered from memory: the same failure, no second transaction.
    await expect(broken.runner.run(broken.request, () => broken.commands)).rejects.toThrow(/lost/);
    await new Promise((r) => setTimeout(r, 10));
    expect(broken.reports).toEqual([]);
    expect(broken.sends()).toBe(1);
  });
});
