// GET /databases: the operator's view of how full the D1 database is, counted from the database itself.
import { env } from 'cloudflare:workers';
import { expect, it } from 'vitest';
import { api } from './helpers.ts';
import { createSyncedAccount, messageIn, rawMessage } from './sync-helpers.ts';

it('shows the database with its size and the emails and accounts it holds', async () => {
  const before = await api('GET', '/databases');
  expect(before.status).toBe(200);
  expect(before.body.data).toHaveLength(1);
  const [db] = before.body.data;
  expect(db).toMatchObject({ object: 'Database', binding: 'DB', limit_bytes: 10_000_000_000 });
  expect(db.size_bytes).toBeGreaterThan(0);

  const account = await createSyncedAccount();
  await account.stub.acquireLease('gw-1');
  const messages = Array.from({ length: 3 }, (_, i) => messageIn(i + 1, rawMessage({ subject: `m${i}` })));
  await account.stub.applyChanges('gw-1', [{ type: 'messages', path: 'INBOX', uidvalidity: 1, messages }]);

  const after = (await api('GET', '/databases')).body.data[0];
  const counted = await env.DB.batch<{ n: number }>([
    env.DB.prepare('SELECT COUNT(*) AS n FROM emails'),
    env.DB.prepare('SELECT COUNT(*) AS n FROM accounts WHERE removed_at_ms IS NULL'),
  ]);
  expect(after.emails).toBe(counted[0]!.results[0]!.n);
  expect(after.accounts).toBe(counted[1]!.results[0]!.n);
  expect(after.emails).toBeGreaterThanOrEqual(db.emails + 3);
});
