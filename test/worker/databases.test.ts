// GET /databases: the operator's view of how full each D1 database is, counted from the database itself.
import { env } from 'cloudflare:workers';
import { expect, it } from 'vitest';
import { shards } from '../../worker/shards/registry.ts';
import { api } from './helpers.ts';
import { createSyncedAccount, messageIn, rawMessage } from './sync-helpers.ts';

/** What a database holds, counted directly: its emails, and the live accounts whose mail it keeps. */
async function counted(db: D1Database, binding: string) {
  const [emails, accounts] = await db.batch<{ n: number }>([
    db.prepare('SELECT COUNT(*) AS n FROM emails'),
    db
      .prepare('SELECT COUNT(*) AS n FROM accounts WHERE removed_at_ms IS NULL AND (shard IS NULL OR shard = ?)')
      .bind(binding),
  ]);
  return { emails: emails!.results[0]!.n, accounts: accounts!.results[0]!.n };
}

it('shows every database with its size and the emails and accounts it holds', async () => {
  const bindings = shards(env).map((s) => s.name);
  const before = await api('GET', '/databases');
  expect(before.status).toBe(200);
  expect(before.body.data.map((d: { binding: string }) => d.binding)).toEqual(bindings);
  for (const db of before.body.data) {
    expect(db).toMatchObject({ object: 'Database', limit_bytes: 10_000_000_000 });
    expect(db.size_bytes).toBeGreaterThan(0);
  }

  const account = await createSyncedAccount();
  await account.stub.acquireLease('gw-1');
  const messages = Array.from({ length: 3 }, (_, i) => messageIn(i + 1, rawMessage({ subject: `m${i}` })));
  await account.stub.applyChanges('gw-1', [{ type: 'messages', path: 'INBOX', uidvalidity: 1, messages }]);

  const after = (await api('GET', '/databases')).body.data as { binding: string; emails: number; accounts: number }[];
  for (const [i, shard] of shards(env).entries()) {
    expect(after[i]).toMatchObject(await counted(shard.db, shard.name));
  }
  const total = (list: { emails: number }[]) => list.reduce((n, d) => n + d.emails, 0);
  expect(total(after)).toBeGreaterThanOrEqual(total(before.body.data) + 3);
  // Every live account of the directory is held by exactly one database.
  const directory = await env.DB.prepare('SELECT COUNT(*) AS n FROM accounts WHERE removed_at_ms IS NULL').first<{
    n: number;
  }>();
  expect(after.reduce((n, d) => n + d.accounts, 0)).toBe(directory!.n);
});
