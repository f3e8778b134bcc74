// End to end: the initial sync against a real Dovecot, through `npm start` (workerd) and the real
// gateway. Mail spread over 40 days is put into the mailbox before the account connects; only the
// window's mail may enter, newest first in pages, while new mail keeps arriving.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MAX_BATCH_MESSAGES } from '../../common/relay-limits.ts';
import { openImap } from '../mailserver/client.ts';
import type { MailServer } from '../mailserver/mailserver.ts';
import { mailboxIntent } from './connect.ts';
import {
  dumpLogsOnFailure,
  eventually,
  startEndToEnd,
  stopEndToEnd,
  type GatewayProcess,
  type Service,
} from './service.ts';

const DAY = 24 * 3600 * 1000;
const HOUR = 3600 * 1000;

let mail: MailServer;
let service: Service;
let gateway: GatewayProcess;

const user = (name: string) => mail.users.find((u) => u.user === name)!;

const intent = (name: string, days: number) =>
  mailboxIntent(mail.info(), name, { initial_sync_enable: true, initial_sync_days: days });

/** APPENDs messages with these arrival times (INTERNALDATE, and a matching Date header), oldest first. */
async function appendOld(name: string, folder: string, items: { subject: string; at: Date }[]): Promise<void> {
  const imap = await openImap(mail.info(), name);
  try {
    for (const { subject, at } of [...items].sort((a, b) => a.at.getTime() - b.at.getTime())) {
      const raw = [
        'From: Old Friend <friend@remote.test>',
        `To: ${user(name).email}`,
        `Subject: ${subject}`,
        `Message-ID: <${subject.replace(/\W+/g, '-')}-${at.getTime()}@remote.test>`,
        `Date: ${at.toUTCString()}`,
        '',
        `sent ${at.toISOString()}`,
        '',
      ].join('\r\n');
      await imap.append(folder, raw, ['\\Seen'], at);
    }
  } finally {
    await imap.logout();
  }
}

const listAll = (accountId: string) => service.listEmails(accountId);

async function connect(name: string, days: number): Promise<{ id: string; initial_sync: string }> {
  const res = await eventually(
    async () => {
      const r = await service.api('POST', '/auth/intent', intent(name, days));
      return r.body?.detail?.includes('No mail gateway') ? null : r;
    },
    { what: 'a connected gateway', timeoutMs: 60_000, intervalMs: 500 },
  );
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

/** Its initial-sync events, from whichever database holds them (they are about the account's row). */
const initialSyncEvents = (accountId: string) =>
  service
    .queryEach<{ type: string }>(
      "SELECT type FROM events WHERE account_id = ? AND type LIKE 'account.initial_sync.%' ORDER BY rowid",
      accountId,
    )
    .flatMap((d) => d.rows.map((r) => r.type));

const completed = (accountId: string, timeoutMs = 60_000) =>
  eventually(async () => (await service.api('GET', `/accounts/${accountId}`)).body.initial_sync === 'completed', {
    what: 'initial sync completed',
    timeoutMs,
    intervalMs: 250,
  });

beforeAll(async () => {
  ({ mail, service, gateway } = await startEndToEnd('gw-initial'));
});

afterEach((ctx) => dumpLogsOnFailure(ctx, service));

afterAll(() => stopEndToEnd({ mail, service }));

describe('initial sync', () => {
  it('pulls exactly the last 7 days of mail, while new mail keeps arriving', { timeout: 180_000 }, async () => {
    const now = Date.now();
    // One message a day for 40 days, an hour past each day mark: days 0..6 are inside a 7-day window.
    await appendOld(
      'alice',
      'INBOX',
      Array.from({ length: 40 }, (_, i) => ({ subject: `inbox day ${i}`, at: new Date(now - i * DAY - HOUR) })),
    );
    await appendOld('alice', 'INBOX', [
      { subject: 'edge inside', at: new Date(now - 7 * DAY + 10 * 60_000) },
      { subject: 'edge outside', at: new Date(now - 7 * DAY - 10 * 60_000) },
    ]);
    await appendOld(
      'alice',
      'Sent',
      Array.from({ length: 10 }, (_, i) => ({
        subject: `sent day ${i * 4}`,
        at: new Date(now - i * 4 * DAY - 2 * HOUR),
      })),
    );

    const account = await connect('alice', 7);
    expect(account).toMatchObject({ initial_sync_enable: true, initial_sync_days: 7 });
    expect(['none', 'running']).toContain(account.initial_sync);
    // New mail during the initial sync.
    await mail.deliver({ from: 'new@remote.test', to: user('alice').email, subject: 'fresh during sync', text: 'new' });

    await completed(account.id);
    const expected = [
      ...Array.from({ length: 7 }, (_, i) => `inbox day ${i}`),
      'edge inside',
      'sent day 0',
      'sent day 4',
      'fresh during sync',
    ].sort();
    const emails = await eventually(
      async () => {
        const all = await listAll(account.id);
        return all.length >= expected.length ? all : null;
      },
      { what: `${expected.length} emails` },
    );
    expect(emails.map((e) => e.subject).sort()).toEqual(expected);
    expect(emails.find((e) => e.subject === 'sent day 4').role).toBe('SENT');
    expect(emails.find((e) => e.subject === 'inbox day 3')).toMatchObject({ role: 'INBOX', unread: false });

    expect(initialSyncEvents(account.id)).toEqual(['account.initial_sync.running', 'account.initial_sync.completed']);
    const news = service.mailQuery<{ n: number }>(
      account.id,
      "SELECT COUNT(*) AS n FROM events WHERE account_id = ? AND type = 'email.new'",
      account.id,
    )[0]!;
    expect(news.n).toBe(expected.length);
    expect((await service.api('GET', `/accounts/${account.id}`)).body).toMatchObject({
      initial_sync: 'completed',
      status: 'running',
    });
  });

  it('resumes after the gateway is killed mid-way, without duplicates', { timeout: 300_000 }, async () => {
    const now = Date.now();
    // More than three pages (MAX_BATCH_MESSAGES each) over the last 2 days, 30 more before the 3-day window.
    const inWindow = 3 * MAX_BATCH_MESSAGES + 100;
    const items = [
      ...Array.from({ length: inWindow }, (_, i) => ({
        subject: `recent ${i}`,
        at: new Date(now - 2 * DAY + i * 60_000),
      })),
      ...Array.from({ length: 30 }, (_, i) => ({ subject: `too old ${i}`, at: new Date(now - 4 * DAY - i * HOUR) })),
    ];
    await appendOld('bob', 'INBOX', items);
    const account = await connect('bob', 3);

    // A page lands whole (one change): kill as soon as the first one did.
    const stored = () =>
      service.mailQuery<{ n: number }>(
        account.id,
        'SELECT COUNT(*) AS n FROM emails WHERE account_id = ?',
        account.id,
      )[0]!.n;
    await eventually(async () => stored() > 0, { what: 'the pull to be under way', timeoutMs: 60_000, intervalMs: 20 });
    await gateway.kill('SIGKILL');
    const atKill = (await listAll(account.id)).length;
    expect(atKill).toBeLessThan(inWindow);
    gateway = service.startGateway('gw-initial', { NODE_EXTRA_CA_CERTS: mail.caFile });

    await completed(account.id, 180_000);
    const emails = await listAll(account.id);
    const subjects = emails.map((e) => e.subject);
    expect(subjects.length).toBe(inWindow);
    expect(new Set(subjects).size).toBe(inWindow);
    expect(subjects.every((s) => s.startsWith('recent '))).toBe(true);
    const news = service.mailQuery<{ n: number }>(
      account.id,
      "SELECT COUNT(*) AS n FROM events WHERE account_id = ? AND type = 'email.new'",
      account.id,
    )[0]!;
    expect(news.n).toBe(inWindow);
    expect(initialSyncEvents(account.id)).toEqual(['account.initial_sync.running', 'account.initial_sync.completed']);
  });
});
