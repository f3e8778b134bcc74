// Mail shards (worker/shards/): accounts on different D1 databases, read back as one workspace.
// Run with three shards by `npm run test:shards` (MAIL_SHARDS=3); with one shard the same tests
// hold for DB alone.
import { runDurableObjectAlarm } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { describe, expect, it, vi } from 'vitest';
import { fromBase64Url } from '../../../worker/lib/crypto.ts';
import { shards } from '../../../worker/shards/registry.ts';
import { api, countIn, NUMBERED_ROWS_OF_ACCOUNT } from '../helpers.ts';
import { listEmails, minute, readAccount } from '../read-helpers.ts';

const all = shards(env);

/** One account per shard (more accounts than shards wrap around). */
async function accountsAcrossShards(count = all.length) {
  const accounts = [];
  for (let i = 0; i < count; i++) accounts.push(await readAccount(undefined, { shard: all[i % all.length]!.name }));
  return accounts;
}

/** The shard each account's rows are in, from the directory. */
async function shardsOf(ids: string[]): Promise<string[]> {
  const rows = await Promise.all(
    ids.map((id) =>
      env.DB.prepare('SELECT shard FROM accounts WHERE id = ?').bind(id).first<{ shard: string | null }>(),
    ),
  );
  return rows.map((r) => r!.shard ?? 'DB');
}

describe('GET /emails over every shard', () => {
  it('pages newest first through accounts on different shards, each email once, while mail arrives', async () => {
    const accounts = await accountsAcrossShards();
    expect(new Set(await shardsOf(accounts.map((a) => a.id))).size).toBe(all.length);
    const ours = new Set(accounts.map((a) => a.id));
    // Interleaved dates across accounts, and the first five minutes shared by all: ties go by id.
    for (const [i, account] of accounts.entries()) {
      await account.deliver(
        'INBOX',
        ...Array.from({ length: 25 }, (_, k) => ({ subject: `old ${i}-${k}`, date: minute(k < 5 ? k : k * 3 + i) })),
      );
      const held = await countIn(all[i]!.db, 'SELECT COUNT(*) AS n FROM emails WHERE account_id = ?', account.id);
      expect(held).toBe(25);
    }

    const seen: { date: number; id: string; subject: string }[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: Awaited<ReturnType<typeof listEmails>> = await listEmails(
        `limit=7${cursor ? `&cursor=${cursor}` : ''}`,
      );
      for (const e of page.data)
        if (ours.has(e.account_id)) seen.push({ date: Date.parse(e.date), id: e.id, subject: e.subject });
      cursor = page.cursor;
      expect(page.has_more).toBe(cursor !== null);
      // New mail between pages, on every shard in turn: dated now, it sorts before the first page.
      await accounts[pages % accounts.length]!.deliver('INBOX', { subject: `new during page ${pages}` });
      pages++;
    } while (cursor);

    const old = seen.filter((e) => e.subject.startsWith('old'));
    expect(old).toHaveLength(25 * accounts.length);
    expect(new Set(old.map((e) => e.id)).size).toBe(old.length);
    expect(seen.some((e) => e.subject.startsWith('new'))).toBe(false);
    // Newest first by (date, id) across the pages and the shards.
    for (let i = 1; i < old.length; i++) {
      const [a, b] = [old[i - 1]!, old[i]!];
      expect(a.date > b.date || (a.date === b.date && a.id > b.id), `${a.subject} before ${b.subject}`).toBe(true);
    }
  }, 120_000);
});

/** The feed's cursor as stored: the positions it holds. */
const cursorPositions = (cursor: string) =>
  (JSON.parse(new TextDecoder().decode(fromBase64Url(cursor))) as { p: (string | number)[] }).p;

describe('GET /events over every shard', () => {
  it('gives every event of every shard exactly once, with a position per shard in its cursor', async () => {
    const accounts = await accountsAcrossShards();
    const ours = new Set(accounts.map((a) => a.id));
    // Events made in turns on every shard, so their creation times interleave.
    for (let round = 0; round < 3; round++)
      for (const account of accounts) await account.deliver('INBOX', { subject: `round ${round}` });

    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res: { status: number; body: any } = await api(
        'GET',
        `/events?limit=4${cursor ? `&cursor=${cursor}` : ''}`,
      );
      expect(res.status).toBe(200);
      for (const e of res.body.data as { id: string; account_id: string | null }[])
        if (e.account_id !== null && ours.has(e.account_id)) seen.push(e.id);
      cursor = res.body.cursor;
      if (cursor) {
        const positions = cursorPositions(cursor);
        if (all.length === 1) expect(positions).toEqual([expect.any(Number)]);
        else expect(positions.filter((_, i) => i % 2 === 0)).toEqual(all.map((s) => s.name));
      }
      // More events while paging: each shard numbers them after its position, so they come later.
      if (pages < 6) await accounts[pages % accounts.length]!.deliver('INBOX', { subject: `during ${pages}` });
      pages++;
    } while (cursor);

    const stored: string[] = [];
    for (const shard of all) {
      const { results } = await shard.db
        .prepare(
          `SELECT id FROM events WHERE account_id IN (${accounts.map(() => '?').join(', ')}) AND account_id IS NOT NULL`,
        )
        .bind(...accounts.map((a) => a.id))
        .all<{ id: string }>();
      stored.push(...results.map((r) => r.id));
    }
    expect(stored.length).toBeGreaterThanOrEqual(3 * accounts.length + 6);
    expect(new Set(seen).size).toBe(seen.length);
    expect([...seen].sort()).toEqual([...stored].sort());
  }, 120_000);

  it('resumes after=evt_… of one shard without repeating or skipping the others', async () => {
    const accounts = await accountsAcrossShards();
    const ours = new Set(accounts.map((a) => a.id));
    const mine = async (query: string) =>
      ((await api('GET', `/events?limit=250${query}`)).body.data as { id: string; account_id: string | null }[])
        .filter((e) => e.account_id !== null && ours.has(e.account_id))
        .map((e) => e.id);
    for (const account of accounts) await account.deliver('INBOX', { subject: 'before' });
    const before = await mine('');
    const last = before[before.length - 1]!;
    for (const account of accounts) await account.deliver('INBOX', { subject: 'after' });
    const after = await mine(`&after=${last}`);
    expect(after.length).toBeGreaterThanOrEqual(accounts.length);
    expect(after.filter((id) => before.includes(id))).toEqual([]);
    expect([...before, ...after].sort()).toEqual((await mine('')).sort());
  }, 60_000);
});

/** Every mail table that holds rows of an account, counted in one database. */
const MAIL_ROWS = [
  'SELECT COUNT(*) AS n FROM accounts WHERE id = ?1',
  'SELECT COUNT(*) AS n FROM folders WHERE account_id = ?1',
  'SELECT COUNT(*) AS n FROM emails WHERE account_id = ?1',
  'SELECT COUNT(*) AS n FROM email_folders WHERE account_id = ?1',
  'SELECT COUNT(*) AS n FROM email_participants WHERE account_id = ?1',
  'SELECT COUNT(*) AS n FROM contacts WHERE account_id = ?1',
  'SELECT COUNT(*) AS n FROM thread_keys WHERE account_id = ?1',
  'SELECT COUNT(*) AS n FROM email_search WHERE account_id = ?1',
  "SELECT COUNT(*) AS n FROM events WHERE account_id = ?1 AND type != 'account.remove'",
  ...Object.values(NUMBERED_ROWS_OF_ACCOUNT),
];

describe('removing an account on a shard', () => {
  it('hides its mail at once and erases its rows in its shard, leaving account.remove in DB', async () => {
    const shard = all[all.length - 1]!;
    const [account] = [await readAccount(undefined, { shard: shard.name })];
    await account.deliver('INBOX', { subject: 'to be erased', from: 'someone@example.test' });
    for (const sql of MAIL_ROWS.slice(0, 3)) expect(await countIn(shard.db, sql, account.id), sql).toBeGreaterThan(0);

    expect((await api('DELETE', `/accounts/${account.id}`)).status).toBe(200);
    const listed = await listEmails('limit=250');
    expect(listed.data.filter((e) => e.account_id === account.id)).toEqual([]);

    for (let runs = 0; runs < 100 && (await runDurableObjectAlarm(account.stub)); runs++);
    for (const sql of MAIL_ROWS) {
      expect(await countIn(shard.db, sql, account.id), `${shard.name}: ${sql}`).toBe(0);
      expect(await countIn(env.DB, sql, account.id), `DB: ${sql}`).toBe(0);
    }
    // account.remove is the one row left of it, in DB, and goes out like any event: to the queue
    // and its fan-out (waiting for it also lets the file end with no queue work in flight).
    await vi.waitFor(
      async () => {
        const left = await env.DB.prepare('SELECT type, fanned_out_at FROM events WHERE account_id = ?')
          .bind(account.id)
          .all<{ type: string; fanned_out_at: string | null }>();
        expect(left.results).toEqual([{ type: 'account.remove', fanned_out_at: expect.any(String) }]);
      },
      { timeout: 10_000 },
    );
  }, 60_000);
});
