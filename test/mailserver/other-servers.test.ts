// The test servers besides the default Dovecot: Dovecot without CONDSTORE/QRESYNC, Courier-IMAP and
// Cyrus IMAP (unpacked from Debian's packages on first use). Checked with a plain IMAP client.
import { readFileSync } from 'node:fs';
import { ImapFlow } from 'imapflow';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openImap } from './client.ts';
import { startCourier } from './courier.ts';
import { startCyrus } from './cyrus.ts';
import { DOVECOT_CAPABILITIES, startMailServer, type MailServer } from './mailserver.ts';
import type { OtherImapServer } from './other-server.ts';

let mail: MailServer;
beforeAll(async () => {
  mail = await startMailServer({ withoutCapabilities: ['CONDSTORE', 'qresync'] });
});
afterAll(() => mail?.stop());

const capabilities = (c: ImapFlow) => [...c.capabilities.keys()];
const message = (subject: string) => `From: x@remote.test\r\nTo: y@example.test\r\nSubject: ${subject}\r\n\r\nbody\r\n`;

describe('dovecot without capabilities', () => {
  it('offers everything else, and the default server offers DOVECOT_CAPABILITIES', async () => {
    const client = await openImap(mail.info(), 'alice');
    try {
      expect(capabilities(client)).toEqual(DOVECOT_CAPABILITIES.filter((c) => c !== 'CONDSTORE' && c !== 'QRESYNC'));
      await client.mailboxOpen('INBOX');
      expect(client.mailbox && client.mailbox.highestModseq).toBeUndefined();
    } finally {
      await client.logout();
    }
    const plain = await startMailServer();
    try {
      const c = await openImap(plain.info(), 'bob');
      expect(capabilities(c)).toEqual(DOVECOT_CAPABILITIES);
      await c.logout();
    } finally {
      await plain.stop();
    }
  });
});

describe.each([
  { name: 'courier', start: startCourier, prefix: 'INBOX.' },
  { name: 'cyrus', start: startCyrus, prefix: '' },
])('$name', ({ name, start, prefix }) => {
  let server: OtherImapServer;
  beforeAll(async () => {
    server = await start({ tls: mail.tls });
  }, 240_000);
  afterAll(() => server?.stop());

  it('logs the test users in over TLS with their passwords, and refuses a wrong one', async () => {
    const client = await server.openImap('alice');
    expect(client.authenticated).toBeTruthy();
    await client.logout();
    const refused = new ImapFlow({
      host: server.host,
      port: server.imapPort,
      secure: true,
      auth: { user: 'alice', pass: 'wrong' },
      tls: { ca: readFileSync(mail.tls.ca, 'utf8') },
      logger: false,
    });
    refused.on('error', () => undefined);
    await expect(refused.connect()).rejects.toThrow();
    refused.close();
  });

  it('has the usual folders, delivers into INBOX and into a user folder', async () => {
    const client = await server.openImap('bob');
    try {
      const folders = await client.list();
      for (const f of ['Drafts', 'Sent', 'Trash', 'Junk', 'Archive'])
        expect(folders.map((x) => x.path)).toContain(`${prefix}${f}`);
      if (name === 'cyrus') {
        // Cyrus answers RETURN (SPECIAL-USE) in lower case (`\\sent`).
        const sent = folders.find((x) => x.path === 'Sent');
        expect(
          [...(sent?.flags ?? [])].map((f) => f.toLowerCase()),
          'SPECIAL-USE on Cyrus',
        ).toContain('\\sent');
      }
      await client.mailboxCreate(server.folderPath('Projects'));
      await server.deliver('bob', message('to inbox'));
      await server.deliver('bob', message('to projects'), server.folderPath('Projects'));
      expect(await client.status('INBOX', { messages: true })).toMatchObject({ messages: 1 });
      expect(await client.status(server.folderPath('Projects'), { messages: true })).toMatchObject({ messages: 1 });
      await client.mailboxOpen(server.folderPath('Projects'));
      const [found] = await client.fetchAll('1:*', { envelope: true });
      expect(found?.envelope?.subject).toBe('to projects');
    } finally {
      await client.logout();
    }
  });

  it('offers what the real server offers', async () => {
    const client = await server.openImap('carol');
    try {
      const caps = capabilities(client);
      expect(caps).toContain('IDLE');
      expect(caps).toContain('UIDPLUS');
      if (name === 'courier')
        for (const c of ['CONDSTORE', 'QRESYNC', 'MOVE', 'SPECIAL-USE']) expect(caps).not.toContain(c);
      else for (const c of ['CONDSTORE', 'QRESYNC', 'MOVE', 'SPECIAL-USE']) expect(caps).toContain(c);
    } finally {
      await client.logout();
    }
  });
});
