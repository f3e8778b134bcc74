// Bounces arriving through the account object: one email.new.bounce with the failed recipient for
// each real bounce of the corpus, none for ordinary mail.
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { fromBase64 } from '../../worker/lib/crypto.ts';
import { normalizeAddress } from '../../worker/ingest/parse.ts';
import { createSyncedAccount, outbox } from './sync-helpers.ts';

describe('bounces through the account object', () => {
  const fixtures = (env as unknown as { TEST_FIXTURES: Record<string, string> }).TEST_FIXTURES;
  const manifest = JSON.parse(new TextDecoder().decode(fromBase64(fixtures['bounces/manifest.json']!))) as Record<
    string,
    string
  >;
  const asMessage = (uid: number, path: string) => {
    const raw = fixtures[path]!;
    return { uid, flags: [], internal_date: new Date().toISOString(), size: fromBase64(raw).length, raw };
  };

  async function ingest(paths: string[]) {
    const account = await createSyncedAccount();
    await account.stub.acquireLease('gw-1');
    for (let i = 0; i < paths.length; i += 25) {
      const messages = paths.slice(i, i + 25).map((p, k) => asMessage(i + k + 1, p));
      const applied = await account.stub.applyChanges('gw-1', [
        { type: 'messages', path: 'INBOX', uidvalidity: 1, messages },
      ]);
      expect(applied.ok).toBe(true);
    }
    const { results } = await account.db
      .prepare('SELECT ef.uid, ef.email_id FROM email_folders ef WHERE ef.account_id = ?')
      .bind(account.id)
      .all<{ uid: number; email_id: string }>();
    const pathOf = new Map(results.map((r) => [r.email_id, paths[r.uid - 1]!]));
    return { events: await outbox(account.id), pathOf };
  }

  it('emits one email.new.bounce with the failed recipient for each of 50+ real bounces', {
    timeout: 120_000,
  }, async () => {
    const paths = Object.keys(manifest).map((p) => `bounces/${p}`);
    expect(paths.length).toBeGreaterThanOrEqual(50);
    const { events, pathOf } = await ingest(paths);
    const bounces = events.filter((e) => e.type === 'email.new.bounce');
    const byPath = new Map<string, any[]>();
    for (const b of bounces)
      byPath.set(pathOf.get(b.data.email_id)!, [...(byPath.get(pathOf.get(b.data.email_id)!) ?? []), b.data]);
    const wrong: string[] = [];
    for (const [path, recipient] of Object.entries(manifest)) {
      const found = byPath.get(`bounces/${path}`) ?? [];
      if (found.length !== 1 || normalizeAddress(found[0].recipient) !== normalizeAddress(recipient)) {
        wrong.push(
          `${path}: expected one bounce for ${recipient}, got ${JSON.stringify(found.map((f) => f.recipient))}`,
        );
      }
    }
    expect(wrong).toEqual([]);
    expect(events.filter((e) => e.type === 'email.new')).toHaveLength(paths.length);
  });

  it('never emits email.new.bounce for ordinary mail', { timeout: 300_000 }, async () => {
    const corpus = Object.keys(fixtures).filter(
      (p) => p.startsWith('corpus/') && !p.endsWith('.json') && !p.endsWith('.md'),
    );
    expect(corpus.length).toBeGreaterThan(100);
    const { events } = await ingest(corpus);
    expect(events.filter((e) => e.type === 'email.new').length).toBeGreaterThan(100);
    expect(events.filter((e) => e.type === 'email.new.bounce')).toEqual([]);
  });
});
