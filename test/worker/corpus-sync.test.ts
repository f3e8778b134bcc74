// Real-world mail through the whole sync path: the gateway's signed changes endpoint, the account
// object, D1, R2 and the read API. No 5xx anywhere, and every message becomes a readable email.
import { env } from 'cloudflare:workers';
import { expect, it } from 'vitest';
import { parseMessage } from '../../worker/ingest/parse.ts';
import { identityOf } from '../../worker/sync/identity.ts';
import { toBase64 } from '../../worker/lib/crypto.ts';
import { api } from './helpers.ts';
import { createSyncedAccount, gatewayCall } from './sync-helpers.ts';

const fixtures = (env as unknown as { TEST_FIXTURES: Record<string, string> }).TEST_FIXTURES;
const corpus = Object.keys(fixtures).filter(
  (p) => (p.startsWith('corpus/') || p.startsWith('bounces/')) && !/\.(json|md)$/.test(p),
);

it('ingests 500+ real-world messages through the changes endpoint with no error', async () => {
  expect(corpus.length).toBeGreaterThan(500);
  const account = await createSyncedAccount();
  // A gateway registers with a heartbeat before it may lease.
  const caller = { gateway_id: 'gw-corpus', instance: 'proc-gw-corpus' };
  expect((await gatewayCall('/internal/gateway/heartbeat', { ...caller, held: [], capacity: 100 })).status).toBe(200);
  const lease = await gatewayCall(`/internal/gateway/accounts/${account.id}/lease`, {
    gateway_id: 'gw-corpus',
    instance: 'proc-gw-corpus',
  });
  expect(lease.body.granted).toBe(true);

  const identities = new Set<string>();
  const messages = await Promise.all(
    corpus.map(async (path, i) => {
      const bytes = Uint8Array.from(atob(fixtures[path]!), (c) => c.charCodeAt(0));
      identities.add(await identityOf({}, await parseMessage(bytes)));
      return {
        uid: i + 1,
        flags: [],
        internal_date: new Date(Date.UTC(2026, 0, 1) + i * 60_000).toISOString(),
        size: bytes.length,
        raw: toBase64(bytes),
      };
    }),
  );
  for (let i = 0; i < messages.length; i += 25) {
    const res = await gatewayCall(`/internal/gateway/accounts/${account.id}/changes`, {
      gateway_id: 'gw-corpus',
      changes: [{ type: 'messages', path: 'INBOX', uidvalidity: 1, messages: messages.slice(i, i + 25) }],
    });
    expect(res.status, `batch at ${i}: ${JSON.stringify(res.body).slice(0, 300)}`).toBe(200);
  }

  // Every (folder, UID) is one email: copies of one message that coexist in INBOX (the corpus has
  // some: fewer identities than files) are separate emails, so none of them goes missing.
  expect(identities.size).toBeLessThan(messages.length);
  const stored = await account.db
    .prepare('SELECT COUNT(*) AS n, COUNT(DISTINCT identity) AS distinct_identities FROM emails WHERE account_id = ?')
    .bind(account.id)
    .first<{ n: number; distinct_identities: number }>();
  expect(stored).toEqual({ n: messages.length, distinct_identities: messages.length });
  const memberships = await account.db
    .prepare('SELECT COUNT(DISTINCT uid) AS n FROM email_folders WHERE account_id = ?')
    .bind(account.id)
    .first<{ n: number }>();
  expect(memberships?.n).toBe(messages.length);

  // The read API pages through all of them and serves each one.
  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const page: { status: number; body: any } = await api(
      'GET',
      `/emails?account_id=${account.id}&limit=250${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
    );
    expect(page.status).toBe(200);
    seen.push(...page.body.data.map((e: { id: string }) => e.id));
    cursor = page.body.cursor;
  } while (cursor);
  expect(new Set(seen).size).toBe(messages.length);
  for (const id of seen.filter((_, i) => i % 7 === 0)) {
    const single = await api('GET', `/emails/${id}`);
    expect(single.status).toBe(200);
    expect(typeof single.body.body_plain).toBe('string');
  }
}, 300_000);
