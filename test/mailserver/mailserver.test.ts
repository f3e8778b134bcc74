/**
 * Proves the harness: a real Dovecot + Postfix started by this file (not the
 * globalSetup one, because it stops/starts Dovecot), checked with imapflow
 * and nodemailer exactly as the gateway would talk to a mail provider.
 */
import net from 'node:net';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ImapFlow } from 'imapflow';
import nodemailer from 'nodemailer';
import { startMailServer, type MailServer } from './mailserver.ts';
import { imapClient, openImap, readCa, submissionTransport, trustTestCa, waitForDelivery } from './client.ts';

let server: MailServer;
const open: ImapFlow[] = [];

beforeAll(async () => {
  server = await startMailServer();
});

afterAll(async () => {
  await Promise.all(open.map((c) => c.logout().catch(() => c.close())));
  await server?.stop();
});

/** openImap + remember for cleanup. */
async function login(user: string, opts: Parameters<typeof openImap>[2] = {}): Promise<ImapFlow> {
  const c = await openImap(server, user, opts);
  open.push(c);
  return c;
}

/** Resolve with the next 'exists' event whose count reaches `atLeast`. */
function nextExists(client: ImapFlow, atLeast: number, timeoutMs = 10_000): Promise<number> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no EXISTS >= ${atLeast} within ${timeoutMs} ms`)), timeoutMs);
    const onExists = (ev: { count: number }) => {
      if (ev.count >= atLeast) {
        clearTimeout(timer);
        client.off('exists', onExists);
        resolve(ev.count);
      }
    };
    client.on('exists', onExists);
  });
}

/** Start IDLE and resolve once the server confirmed it (the IDLE promise itself only settles when IDLE ends). */
async function startIdle(client: ImapFlow): Promise<void> {
  void client.idle();
  const deadline = Date.now() + 5_000;
  while (!client.idling) {
    if (Date.now() > deadline) throw new Error('IDLE did not start');
    await new Promise((r) => setTimeout(r, 2));
  }
}

async function subjectsIn(user: string, mailbox = 'INBOX'): Promise<string[]> {
  const c = await openImap(server, user, { disableAutoIdle: true });
  try {
    const box = await c.mailboxOpen(mailbox, { readOnly: true });
    const subjects: string[] = [];
    if (box.exists === 0) return subjects; // FETCH 1:* would be an error
    for await (const msg of c.fetch('1:*', { envelope: true })) subjects.push(msg.envelope?.subject ?? '');
    return subjects;
  } finally {
    await c.logout();
  }
}

function portAccepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

describe('Dovecot IMAP', () => {
  it('uses distinct dynamic loopback ports and a generated CA', () => {
    const ports = [
      server.imapPort,
      server.imapPlainPort,
      server.imapSoloPort,
      server.smtpPort,
      server.smtpsPort,
      server.mxPort,
    ];
    expect(new Set(ports).size).toBe(6);
    for (const p of ports) expect(p).toBeGreaterThan(1024);
    expect(readCa(server)).toMatch(/-----BEGIN CERTIFICATE-----/);
    expect(server.users.map((u) => u.email)).toEqual(
      ['alice', 'bob', 'carol', 'dave', 'erin'].map((n) => `${n}@example.test`),
    );
  });

  it('lets alice log in over IMAPS, verifying the certificate against the CA, with IDLE/CONDSTORE/QRESYNC/SPECIAL-USE', async () => {
    const c = await login('alice');
    expect(c.secureConnection).toBe(true);
    expect(c.authenticated).toBeTruthy();
    const caps = [...c.capabilities.keys()];
    for (const cap of ['IDLE', 'CONDSTORE', 'QRESYNC', 'SPECIAL-USE', 'UIDPLUS', 'MOVE']) expect(caps).toContain(cap);
  });

  it('accepts the full email address as login name too', async () => {
    const c = await login('alice', { auth: { user: 'alice@example.test', pass: 'alice-password' } });
    expect(c.authenticated).toBeTruthy();
  });

  it('rejects a wrong password', async () => {
    const c = imapClient(server, 'alice', { password: 'not-the-password' });
    const err = await c.connect().then(
      () => null,
      (e: unknown) => e,
    );
    c.close();
    expect(err).toMatchObject({ authenticationFailed: true });
  });

  it('rejects the certificate when the CA is not trusted (TLS is really verified)', async () => {
    const c = imapClient(server, 'alice', { tls: { ca: [] } });
    const err = await c.connect().then(
      () => null,
      (e: unknown) => e,
    );
    c.close();
    expect(String((err as Error | null)?.message ?? err)).toMatch(/certificate|self.signed|issuer/i);
  });

  it("trustTestCa() adds the CA to this process' default trust store", async () => {
    const verifies = () =>
      new Promise<boolean>((resolve) => {
        const s = tls.connect({ host: server.host, port: server.imapPort }, () => {
          resolve(s.authorized);
          s.destroy();
        });
        s.once('error', () => resolve(false));
      });
    expect(await verifies()).toBe(false); // this server's CA is new to the process
    trustTestCa(server);
    expect(await verifies()).toBe(true);
  });

  it('offers STARTTLS on the plain port and also allows plaintext LOGIN there', async () => {
    const tlsClient = await login('bob', { plainPort: true });
    expect(tlsClient.secureConnection).toBe(true);
    const plain = await login('bob', { plainPort: true, doSTARTTLS: false });
    expect(plain.secureConnection).toBe(false);
    expect(plain.authenticated).toBeTruthy();
  });

  it('gives each connection on the solo port an imap process of its own, where above 1,000 connections the others share', async () => {
    const many = await startMailServer({ maxImapConnections: 1100 });
    const clients: ImapFlow[] = [];
    try {
      for (const soloPort of [false, false, true, true]) clients.push(await openImap(many, 'alice', { soloPort }));
      const pids = (await many.doveadm(['who', '-1']))
        .split('\n')
        .slice(1)
        .map((line) => line.trim().split(/\s+/))
        .filter(([user, proto]) => user === 'alice' && proto === 'imap')
        .map(([, , pid]) => pid);
      expect(pids).toHaveLength(4);
      // The two IMAPS connections in one process, each solo one in a process of its own.
      expect(new Set(pids).size).toBe(3);
    } finally {
      await Promise.all(clients.map((c) => c.logout().catch(() => c.close())));
      await many.stop();
    }
  });

  it('auto-creates and subscribes the special-use folders', async () => {
    const c = await login('carol');
    const boxes = await c.list();
    const expected: Record<string, string> = {
      Sent: '\\Sent',
      Drafts: '\\Drafts',
      Trash: '\\Trash',
      Junk: '\\Junk',
      Archive: '\\Archive',
    };
    for (const [name, flag] of Object.entries(expected)) {
      const box = boxes.find((b) => b.path === name);
      expect(box, name).toBeDefined();
      expect(box?.specialUse).toBe(flag);
      expect(box?.specialUseSource).toBe('extension'); // announced by the server, not guessed from the name
      expect(box?.subscribed).toBe(true);
    }
    expect(boxes.find((b) => b.path === 'INBOX')).toBeDefined();
  });
});

describe('Postfix delivery', () => {
  it('delivers mail to alice through the MX port and IDLE sees EXISTS quickly', async () => {
    const c = await login('alice', { disableAutoIdle: true });
    const box = await c.mailboxOpen('INBOX');
    const before = box.exists;
    await startIdle(c);

    const exists = nextExists(c, before + 1);
    const subject = `idle test ${Date.now()}`;
    const sent = await server.deliver({
      from: 'someone@remote.test',
      to: 'alice@example.test',
      subject,
      text: 'hello',
      wait: false,
    });
    const accepted = Date.now(); // Postfix answered 250 queued
    expect(sent.queueId).toMatch(/^[0-9A-F]+$/);
    await exists;
    const latency = Date.now() - accepted;
    console.log(`delivery latency: Postfix 250 -> IMAP EXISTS during IDLE = ${latency} ms`);
    expect(latency).toBeLessThan(3_000);

    expect(await subjectsIn('alice')).toContain(subject);
  });

  it('deliver() waits for final delivery by default (message is fetchable right after)', async () => {
    const subject = `wait test ${Date.now()}`;
    const t = Date.now();
    await server.deliver({
      from: 'someone@remote.test',
      to: ['dave@example.test', 'erin@example.test'],
      subject,
      text: 'x',
    });
    console.log(`deliver() incl. waiting for LMTP delivery to 2 users: ${Date.now() - t} ms`);
    expect(await subjectsIn('dave')).toContain(subject);
    expect(await subjectsIn('erin')).toContain(subject);
  });

  it('delivers a raw RFC 822 message verbatim', async () => {
    const raw = [
      'From: Raw Sender <raw@remote.test>',
      'To: carol@example.test',
      'Subject: raw message',
      'Message-ID: <raw-1@remote.test>',
      'Date: Mon, 01 Jan 2024 10:00:00 +0000',
      '',
      'raw body',
      '',
    ].join('\r\n');
    await server.deliver({ from: 'raw@remote.test', to: 'carol@example.test', raw });
    const c = await openImap(server, 'carol', { disableAutoIdle: true });
    try {
      await c.mailboxOpen('INBOX');
      const uids = await c.search({ header: { 'message-id': '<raw-1@remote.test>' } }, { uid: true });
      expect(uids).toHaveLength(1);
      const msg = await c.fetchOne(String((uids as number[])[0]), { source: true }, { uid: true });
      expect(msg && msg.source?.toString()).toContain('raw body');
    } finally {
      await c.logout();
    }
  });

  it('rejects unknown local recipients and refuses to relay from the MX port', async () => {
    await expect(server.deliver({ from: 'a@remote.test', to: 'nobody@example.test', text: 'x' })).rejects.toThrow(
      /550.*(unknown|rejected)/i,
    );
    await expect(server.deliver({ from: 'a@remote.test', to: 'victim@elsewhere.test', text: 'x' })).rejects.toThrow(
      /Relay access denied/,
    );
  });

  it('accepts a 30 MB message', async () => {
    const big = Buffer.alloc(30 * 1024 * 1024, 'a');
    const subject = `big ${Date.now()}`;
    await server.deliver({
      from: 'big@remote.test',
      to: 'bob@example.test',
      subject,
      text: 'see attachment',
      attachments: [{ filename: 'big.bin', content: big }],
      timeoutMs: 60_000,
    });
    const c = await openImap(server, 'bob', { disableAutoIdle: true });
    try {
      await c.mailboxOpen('INBOX');
      const uids = (await c.search({ subject }, { uid: true })) as number[];
      expect(uids).toHaveLength(1);
      const msg = await c.fetchOne(String(uids[0]), { size: true }, { uid: true });
      expect(msg && msg.size).toBeGreaterThan(30 * 1024 * 1024); // base64 makes it ~40 MB
    } finally {
      await c.logout();
    }
  });
});

describe('Postfix submission', () => {
  it('lets alice send to bob with AUTH over STARTTLS (587-style) and implicit TLS (465-style)', async () => {
    for (const implicitTls of [false, true]) {
      const subject = `from alice ${implicitTls ? 'smtps' : 'submission'} ${Date.now()}`;
      const t = submissionTransport(server, 'alice', { implicitTls });
      try {
        const offset = 0;
        const info = await t.sendMail({ from: 'alice@example.test', to: 'bob@example.test', subject, text: 'hi bob' });
        const queueId = /queued as ([0-9A-F]+)/.exec(String(info.response))?.[1];
        expect(queueId).toBeDefined();
        await waitForDelivery(server.postfixLog, queueId ?? '', { offset });
      } finally {
        t.close();
      }
      expect(await subjectsIn('bob')).toContain(subject);
    }
  });

  it('refuses to relay for unauthenticated clients and rejects wrong passwords', async () => {
    const anon = nodemailer.createTransport({
      host: server.host,
      port: server.smtpPort,
      requireTLS: true,
      tls: { ca: readCa(server) },
    });
    await expect(anon.sendMail({ from: 'alice@example.test', to: 'bob@example.test', text: 'x' })).rejects.toThrow(
      /554 5\.7\.1 .*Access denied/,
    );
    anon.close();

    const wrong = nodemailer.createTransport({
      host: server.host,
      port: server.smtpPort,
      requireTLS: true,
      auth: { user: 'alice', pass: 'wrong' },
      tls: { ca: readCa(server) },
    });
    await expect(
      wrong.sendMail({ from: 'alice@example.test', to: 'bob@example.test', text: 'x' }),
    ).rejects.toMatchObject({ code: 'EAUTH' });
    wrong.close();
  });

  it('requires STARTTLS before anything else on the submission port', async () => {
    const plain = nodemailer.createTransport({
      host: server.host,
      port: server.smtpPort,
      ignoreTLS: true,
      auth: { user: 'alice', pass: 'alice-password' },
    });
    await expect(plain.sendMail({ from: 'alice@example.test', to: 'bob@example.test', text: 'x' })).rejects.toThrow(
      /530 5\.7\.0 Must issue a STARTTLS command first/,
    );
    plain.close();
  });

  it('captures mail to external domains in the sink mailbox instead of relaying it', async () => {
    const subject = `external ${Date.now()}`;
    const t = submissionTransport(server, 'alice');
    try {
      const info = await t.sendMail({ from: 'alice@example.test', to: 'friend@gmail.test', subject, text: 'out' });
      await waitForDelivery(server.postfixLog, /queued as ([0-9A-F]+)/.exec(String(info.response))?.[1] ?? '');
    } finally {
      t.close();
    }
    expect(await subjectsIn('sink')).toContain(subject);
  });
});

describe('Dovecot restart', () => {
  it('keeps the mail across stopDovecot/startDovecot, and mail sent meanwhile arrives after the restart', async () => {
    const subject = `before restart ${Date.now()}`;
    await server.deliver({ from: 'x@remote.test', to: 'erin@example.test', subject, text: 'x' });
    const c = await openImap(server, 'erin', { disableAutoIdle: true });
    const { uidValidity } = await c.mailboxOpen('INBOX');
    const closed = new Promise<void>((resolve) => c.once('close', () => resolve()));

    await server.stopDovecot();
    await closed; // the open IMAP session is dropped, as with a real outage
    expect(await portAccepts(server.imapPort)).toBe(false);
    expect(await portAccepts(server.imapPlainPort)).toBe(false);

    // Postfix still accepts and queues (LMTP fails -> deferred).
    const during = `during outage ${Date.now()}`;
    const queued = await server.deliver({
      from: 'x@remote.test',
      to: 'erin@example.test',
      subject: during,
      text: 'x',
      wait: false,
    });

    await server.startDovecot();
    expect(await portAccepts(server.imapPort)).toBe(true);
    await waitForDelivery(server.postfixLog, queued.queueId, { timeoutMs: 15_000 });

    const subjects = await subjectsIn('erin');
    expect(subjects).toContain(subject);
    expect(subjects).toContain(during);
    const again = await login('erin', { disableAutoIdle: true });
    expect((await again.mailboxOpen('INBOX')).uidValidity).toBe(uidValidity);
  });
});
