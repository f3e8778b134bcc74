// End to end: the connection economy of idle accounts (docs/sync.md). 20 accounts
// on a real Dovecot hold at most 2 IMAP connections each, counted by the server (`doveadm who`), and
// changes in folders nobody IDLEs on (a user-created one, one that existed before the connect)
// reach the API within 30 s with the gateway's default settings.
import type { ImapFlow } from 'imapflow';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openImap } from '../mailserver/client.ts';
import { DEFAULT_USERS, startMailServer, type MailServer } from '../mailserver/mailserver.ts';
import { connectMailbox } from './connect.ts';
import { dumpLogsOnFailure, eventually, startService, type GatewayProcess, type Service } from './service.ts';

const ACCOUNTS = 20;
/** Changes in other folders reach the API within 30 s by default. */
const WITHIN_MS = 30_000;
const users = Array.from({ length: ACCOUNTS }, (_, i) => `idle${String(i).padStart(2, '0')}`);

let mail: MailServer;
let service: Service;
let gateway: GatewayProcess;
const accounts = new Map<string, { id: string }>();
const clients: ImapFlow[] = [];

/** IMAP connections per user as Dovecot counts them (one `doveadm who -1` line per connection). */
async function connectionsPerUser(): Promise<Map<string, number>> {
  const out = await mail.doveadm(['who', '-1']);
  const counts = new Map<string, number>();
  for (const line of out.split('\n').slice(1)) {
    const [user, proto] = line.trim().split(/\s+/);
    if (!user || proto !== 'imap') continue;
    counts.set(user, (counts.get(user) ?? 0) + 1);
  }
  return counts;
}

/** Logs a test client out, so that it is not counted with the gateway's connections any more. */
async function done(client: ImapFlow): Promise<void> {
  clients.splice(clients.indexOf(client), 1);
  await client.logout();
}

async function imap(user: string): Promise<ImapFlow> {
  const client = await openImap(mail.info(), user);
  clients.push(client);
  return client;
}

const rfc822 = (subject: string) =>
  [
    'From: someone@remote.test',
    'To: x@example.test',
    `Subject: ${subject}`,
    `Message-ID: <${subject.replace(/\W/g, '-')}-${Date.now()}@remote.test>`,
    '',
    'hello',
    '',
  ].join('\r\n');

async function emailBySubject(accountId: string, subject: string): Promise<any | undefined> {
  return (await service.listEmails(accountId)).find((e: any) => e.subject === subject);
}

beforeAll(async () => {
  mail = await startMailServer({ users: [...DEFAULT_USERS, ...users] });
  service = await startService();
  // The gateway's defaults (poll interval, IDLE connections): only the CA is set.
  gateway = service.startGateway('gw-conns', { NODE_EXTRA_CA_CERTS: mail.caFile });
  for (const user of users) accounts.set(user, await connectMailbox(service, mail.info(), user));
}, 300_000);

afterEach((ctx) => dumpLogsOnFailure(ctx, service));

afterAll(async () => {
  await Promise.all(clients.map((c) => c.logout().catch(() => undefined)));
  await service?.stop();
  await mail?.stop();
});

describe('idle accounts', () => {
  it('hold at most 2 IMAP connections each, counted on the server', async () => {
    // Every account is running and its first catch-up is over (its folders are listed).
    await eventually(
      async () => {
        const rows = service.query<{ n: number }>(
          "SELECT COUNT(*) AS n FROM accounts WHERE status = 'running' AND gateway_id IS NOT NULL",
        );
        return rows[0]?.n === ACCOUNTS;
      },
      { what: `${ACCOUNTS} running accounts`, timeoutMs: 120_000, intervalMs: 500 },
    );
    const folders = await service.api('GET', `/folders?account_id=${accounts.get(users[0]!)!.id}`);
    expect(folders.body.data.length).toBeGreaterThanOrEqual(6);
    // Counted twice, a poll interval apart: polling does not open connections of its own.
    for (let round = 0; round < 2; round++) {
      const counts = await connectionsPerUser();
      for (const user of users) {
        const n = counts.get(user) ?? 0;
        expect(n, `${user} connections`).toBeGreaterThanOrEqual(1);
        expect(n, `${user} connections`).toBeLessThanOrEqual(2);
      }
      if (round === 0) await new Promise((r) => setTimeout(r, 20_000));
    }
  }, 200_000);

  it('relays new mail and flag changes of a user-created folder within 30 s', async () => {
    const user = users[1]!;
    const account = accounts.get(user)!;
    const client = await imap(user);
    await client.mailboxCreate('Projects');
    await eventually(
      async () =>
        (await service.api('GET', `/folders?account_id=${account.id}`)).body.data.some(
          (f: any) => f.provider_id === 'Projects',
        ),
      { what: 'the new folder listed', timeoutMs: WITHIN_MS, intervalMs: 250 },
    );
    await client.append('Projects', rfc822('in projects'));
    const email = await eventually(() => emailBySubject(account.id, 'in projects'), {
      what: 'the new message of Projects',
      timeoutMs: WITHIN_MS,
      intervalMs: 250,
    });
    expect(email.starred).toBe(false);

    await client.mailboxOpen('Projects');
    await client.messageFlagsAdd('1:*', ['\\Flagged']);
    await eventually(async () => (await emailBySubject(account.id, 'in projects'))?.starred === true, {
      what: 'starred after \\Flagged in Projects',
      timeoutMs: WITHIN_MS,
      intervalMs: 250,
    });
    await client.messageFlagsRemove('1:*', ['\\Flagged']);
    await eventually(async () => (await emailBySubject(account.id, 'in projects'))?.starred === false, {
      what: 'unstarred after \\Flagged removed in Projects',
      timeoutMs: WITHIN_MS,
      intervalMs: 250,
    });
    await done(client);
  }, 200_000);

  it('relays an unflag in a folder that existed before the connect within 30 s', async () => {
    const user = users[2]!;
    const account = accounts.get(user)!;
    const client = await imap(user);
    await client.append('Archive', rfc822('in archive'), ['\\Flagged']);
    const email = await eventually(() => emailBySubject(account.id, 'in archive'), {
      what: 'the new message of Archive',
      timeoutMs: WITHIN_MS,
      intervalMs: 250,
    });
    expect(email.starred).toBe(true);
    await client.mailboxOpen('Archive');
    await client.messageFlagsRemove('1:*', ['\\Flagged']);
    await eventually(async () => (await emailBySubject(account.id, 'in archive'))?.starred === false, {
      what: 'unstarred after \\Flagged removed in Archive',
      timeoutMs: WITHIN_MS,
      intervalMs: 250,
    });
    await client.messageFlagsAdd('1:*', ['\\Seen']);
    await eventually(async () => (await emailBySubject(account.id, 'in archive'))?.unread === false, {
      what: 'read after \\Seen in Archive',
      timeoutMs: WITHIN_MS,
      intervalMs: 250,
    });
    await done(client);
  }, 200_000);

  it('without CONDSTORE and QRESYNC: relays flag changes of a user-created folder within 30 s', async () => {
    // The same gateway id takes its accounts back at once; this one leaves the extensions unused.
    await gateway.kill('SIGTERM');
    gateway = service.startGateway('gw-conns', {
      NODE_EXTRA_CA_CERTS: mail.caFile,
      GATEWAY_IMAP_CONDSTORE: '0',
      GATEWAY_IMAP_QRESYNC: '0',
    });
    await eventually(() => gateway.log.some((line) => line.includes('"condstore":false')), {
      what: 'a session without CONDSTORE',
      timeoutMs: 60_000,
      intervalMs: 250,
    });
    const user = users[3]!;
    const account = accounts.get(user)!;
    const client = await imap(user);
    await client.mailboxCreate('Plain');
    await client.append('Plain', rfc822('in plain'));
    await eventually(() => emailBySubject(account.id, 'in plain'), {
      what: 'the new message of Plain',
      timeoutMs: 60_000,
      intervalMs: 250,
    });
    await client.mailboxOpen('Plain');
    await client.messageFlagsAdd('1:*', ['\\Flagged']);
    await eventually(async () => (await emailBySubject(account.id, 'in plain'))?.starred === true, {
      what: 'starred after \\Flagged in Plain',
      timeoutMs: WITHIN_MS,
      intervalMs: 250,
    });
    await client.messageFlagsRemove('1:*', ['\\Flagged']);
    await eventually(async () => (await emailBySubject(account.id, 'in plain'))?.starred === false, {
      what: 'unstarred after \\Flagged removed in Plain',
      timeoutMs: WITHIN_MS,
      intervalMs: 250,
    });
    await done(client);
    // The first gateway's connections are gone once Dovecot noticed; then again at most 2 each.
    await eventually(
      async () => {
        const counts = await connectionsPerUser();
        const over = users.filter((u) => (counts.get(u) ?? 0) > 2).map((u) => `${u}: ${counts.get(u)}`);
        if (over.length) throw new Error(`more than 2: ${over.join(', ')}`);
        return true;
      },
      { what: 'at most 2 connections per account', timeoutMs: 30_000, intervalMs: 500 },
    );
  }, 200_000);
});
