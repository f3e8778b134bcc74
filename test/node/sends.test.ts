// The gateway sends each outgoing message at most once, however often the Worker asks, and reports
// an outcome only when it is known (gateway/sends.ts).
import { type AddressInfo, createServer, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import type { OutgoingMessage, SendOutcome } from '../../common/relay.ts';
import { DEFAULT_SYNC } from '../../gateway/config.ts';
import { GatewayError } from '../../gateway/errors.ts';
import { createLogger } from '../../gateway/log.ts';
import { MailboxCommands } from '../../gateway/mailbox.ts';
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

/**
 * A scripted SMTP server: answers the envelope, then, at `failAt`, goes silent or resets the
 * connection (at `body`: after taking the whole message, before its final reply).
 */
async function fakeSmtp(failAt: 'rcpt' | 'body', how: 'stall' | 'reset') {
  const sockets = new Set<Socket>();
  const seen: string[] = [];
  const fail = (socket: Socket) => {
    if (how === 'reset') socket.resetAndDestroy();
  };
  const server = createServer((socket) => {
    sockets.add(socket);
    let buffer = '';
    let inData = false;
    socket.on('error', () => {});
    socket.write('220 fake.test ESMTP\r\n');
    socket.on('data', (chunk) => {
      buffer += chunk.toString('latin1');
      for (;;) {
        if (inData) {
          const end = buffer.indexOf('\r\n.\r\n');
          if (end < 0) return;
          buffer = buffer.slice(end + 5);
          inData = false;
          seen.push('body');
          fail(socket);
          return;
        }
        const eol = buffer.indexOf('\r\n');
        if (eol < 0) return;
        const line = buffer.slice(0, eol);
        buffer = buffer.slice(eol + 2);
        const verb = line.split(' ')[0]?.toUpperCase() ?? '';
        seen.push(verb);
        if (verb === 'EHLO') socket.write('250-fake.test\r\n250-AUTH PLAIN\r\n250 8BITMIME\r\n');
        else if (verb === 'AUTH') socket.write('235 ok\r\n');
        else if (verb === 'MAIL') socket.write('250 ok\r\n');
        else if (verb === 'RCPT') {
          if (failAt === 'rcpt') return fail(socket);
          socket.write('250 ok\r\n');
        } else if (verb === 'DATA') {
          inData = true;
          socket.write('354 go ahead\r\n');
        } else if (verb === 'QUIT') socket.end('221 bye\r\n');
        else socket.write('502 no\r\n');
      }
    });
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const stop = async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  };
  return { port, seen, stop };
}

function commandsFor(port: number): MailboxCommands {
  const server = { host: '127.0.0.1', port, encryption: 'NONE', user: 'me@example.test', password: 'pw' } as const;
  return new MailboxCommands(
    { email: 'me@example.test', display_name: null, imap: server, smtp: server },
    { ...DEFAULT_SYNC, connectTimeoutMs: 300 },
    createLogger('error'),
    { commandConnection: () => null, changed: () => {} },
  );
}

const outgoing: OutgoingMessage = {
  message_id: '<m2@example.test>',
  from: { name: '', address: 'me@example.test' },
  to: [{ name: '', address: 'you@example.test' }],
  cc: [],
  bcc: [],
  subject: 'Hello',
  html: '',
  text: 'Hello there',
  in_reply_to: null,
  references: [],
  headers: [],
  attachments: [],
};

describe('MailboxCommands.send over a failing SMTP link', () => {
  /** Sends through a fake server that breaks the link (`how`) once it has seen `at`: the failure. */
  async function failedSend(at: 'body' | 'rcpt', how: 'stall' | 'reset') {
    const server = await fakeSmtp(at, how);
    const commands = commandsFor(server.port);
    try {
      const failure = await commands.send('send', outgoing, null).then(
        () => null,
        (err: unknown) => err,
      );
      expect(failure).toBeInstanceOf(GatewayError);
      return { seen: server.seen, mayHaveSent: (failure as GatewayError).mayHaveSent };
    } finally {
      commands.close();
      await server.stop();
    }
  }

  for (const how of ['stall', 'reset'] as const) {
    it(`counts a server that took the body and then ${how}s as may have sent`, async () => {
      const { seen, mayHaveSent } = await failedSend('body', how);
      expect(seen).toContain('body');
      expect(mayHaveSent).toBe(true);
    });

    it(`counts a link that ${how}s before DATA as not sent`, async () => {
      const { seen, mayHaveSent } = await failedSend('rcpt', how);
      expect(seen).toContain('RCPT');
      expect(seen).not.toContain('DATA');
      expect(mayHaveSent).toBe(false);
    });
  }

  it('counts a refused connection as not sent', async () => {
    const server = await fakeSmtp('rcpt', 'reset');
    await server.stop();
    const commands = commandsFor(server.port);
    try {
      const failure = await commands.send('send', outgoing, null).catch((err: unknown) => err);
      expect(failure).toBeInstanceOf(GatewayError);
      expect((failure as GatewayError).mayHaveSent).toBe(false);
    } finally {
      commands.close();
    }
  });
});
