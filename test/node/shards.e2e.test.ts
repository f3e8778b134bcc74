// End to end with three mail databases (MAIL_SHARDS=3, worker/shards/): accounts on different D1
// shards read back as one workspace while mail arrives, their webhooks called from their own shard,
// and a removed account's mail gone. Real Postfix → Dovecot → gateway → `npm start` → a subscriber.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectMailbox } from './connect.ts';
import { endToEndSuite } from './integrity-helpers.ts';
import { eventually } from './service.ts';
import { startSubscriber, type SubscriberCall } from './subscriber.ts';

const suite = endToEndSuite('gw-shards', { worker: { MAIL_SHARDS: '3' } });

let subscriber: Awaited<ReturnType<typeof startSubscriber>>;
let calls: SubscriberCall[] = [];

beforeAll(async () => {
  subscriber = await startSubscriber();
  calls = subscriber.calls;
});

afterAll(() => subscriber?.close());

interface Listed {
  id: string;
  account_id: string;
  subject: string;
  date: string;
}

/** Strictly newest first: by date, then by id, both descending (the list's order). */
function assertNewestFirst(emails: Listed[]): void {
  for (let i = 1; i < emails.length; i++) {
    const [a, b] = [emails[i - 1]!, emails[i]!];
    const later = Date.parse(a.date) > Date.parse(b.date) || (a.date === b.date && a.id > b.id);
    expect(later, `${a.subject} (${a.date} ${a.id}) before ${b.subject} (${b.date} ${b.id})`).toBe(true);
  }
}

/** One pass through `GET /emails` of every account, `limit` at a time: what it listed, in order. */
async function pageAll(limit: number): Promise<Listed[]> {
  const seen: Listed[] = [];
  let cursor: string | undefined;
  do {
    const page = await suite.service.api('GET', `/emails?limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`);
    expect(page.status, JSON.stringify(page.body)).toBe(200);
    seen.push(...page.body.data);
    cursor = page.body.cursor ?? undefined;
  } while (cursor);
  return seen;
}

const bindings = ['DB', 'MAIL_DB_2', 'MAIL_DB_3'];
const databases = async () =>
  new Map<string, { accounts: number; emails: number }>(
    (await suite.service.api('GET', '/databases')).body.data.map((d: any) => [d.binding, d]),
  );

describe('three mail databases', () => {
  const names = ['alice', 'bob', 'carol'];
  let accounts: { id: string; email: string }[] = [];

  it('lists every account’s mail as one, newest first, each email once while mail arrives; webhooks for all', async () => {
    const endpoint = await suite.service.api('POST', '/webhooks/endpoints', {
      url: subscriber.url,
      trigger_events: ['email.new', 'account.remove'],
    });
    expect(endpoint.status, JSON.stringify(endpoint.body)).toBe(200);
    for (const name of names) accounts.push(await connectMailbox(suite.service, suite.mail.info(), name));
    // Each new account goes to the database holding the fewest: one on each.
    const held = await databases();
    expect(bindings.map((b) => held.get(b)?.accounts)).toEqual([1, 1, 1]);

    const subjects: string[] = [];
    let delivering = true;
    const delivered = (async () => {
      try {
        for (let round = 0; round < 6; round++)
          for (const name of names) {
            const subject = `sharded ${name} ${round}`;
            subjects.push(subject);
            await suite.mail.deliver({
              from: 'x@remote.test',
              to: `${name}@example.test`,
              subject,
              text: subject,
            });
          }
      } finally {
        delivering = false;
      }
    })();
    // Paging while the mail arrives: every pass is in order and lists no email twice.
    let passes = 0;
    while (delivering || passes === 0) {
      const pass = await pageAll(4);
      assertNewestFirst(pass);
      expect(new Set(pass.map((e) => e.id)).size).toBe(pass.length);
      passes++;
    }
    await delivered;

    const ours = new Set(subjects);
    const listed = await eventually(
      async () => {
        const pass = (await pageAll(5)).filter((e) => ours.has(e.subject));
        return pass.length >= subjects.length ? pass : null;
      },
      { what: `all ${subjects.length} emails listed`, timeoutMs: 60_000, intervalMs: 500 },
    );
    assertNewestFirst(listed);
    expect(listed.map((e) => e.subject).sort()).toEqual([...subjects].sort());
    const byAccount = new Map(accounts.map((a) => [a.id, listed.filter((e) => e.account_id === a.id).length]));
    expect([...byAccount.values()]).toEqual([6, 6, 6]);
    const after = await databases();
    expect(bindings.map((b) => after.get(b)?.emails)).toEqual([6, 6, 6]);

    // Every new email called, from whichever shard holds it; a repeat carries the same webhook-id.
    const calledFor = await eventually(
      () => {
        const news = calls.filter((c) => c.json.type === 'email.new' && ours.has(c.json.data.subject));
        const ids = new Set(news.map((c) => c.json.data.id));
        return ids.size === subjects.length ? news : null;
      },
      { what: 'an email.new call for every email', timeoutMs: 60_000 },
    );
    expect(new Set(calledFor.map((c) => c.json.data.id))).toEqual(new Set(listed.map((e) => e.id)));
    for (const email of listed) {
      const ids = new Set(calledFor.filter((c) => c.json.data.id === email.id).map((c) => c.headers['webhook-id']));
      expect(ids.size, email.subject).toBe(1);
    }
  });

  it('removes an account of another database: its mail leaves every list and read, account.remove called', async () => {
    const [row] = suite.service.query<{ id: string }>('SELECT id FROM accounts WHERE shard = ?', 'MAIL_DB_2');
    const removed = accounts.find((a) => a.id === row!.id)!;
    const before = (await pageAll(50)).filter((e) => e.account_id === removed.id);
    expect(before.length).toBe(6);

    const res = await suite.service.api('DELETE', `/accounts/${removed.id}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect((await pageAll(50)).filter((e) => e.account_id === removed.id)).toEqual([]);
    for (const email of before) expect((await suite.service.api('GET', `/emails/${email.id}`)).status).toBe(404);
    await eventually(() => calls.some((c) => c.json.type === 'account.remove' && c.json.account_id === removed.id), {
      what: 'the account.remove call',
      timeoutMs: 60_000,
    });
    // Its rows leave its database too, and the others keep theirs.
    await eventually(async () => (await databases()).get('MAIL_DB_2')?.emails === 0, {
      what: 'the removed account’s emails purged from MAIL_DB_2',
      timeoutMs: 60_000,
    });
    const left = await databases();
    expect(['DB', 'MAIL_DB_3'].map((b) => left.get(b)?.emails)).toEqual([6, 6]);
    accounts = accounts.filter((a) => a !== removed);
  });
});
