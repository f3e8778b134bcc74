import { cloudflareTest, readD1Migrations } from '@cloudflare/vitest-plugin';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineProject } from 'vitest/config';
import { mailShardBindings } from '../../scripts/mail-shards.mjs';

const root = fileURLToPath(new URL('../..', import.meta.url));

// Test fixtures as { 'corpus/x/y.eml': base64 }: workerd cannot read the filesystem, and Vite's ?raw
// imports would decode non-UTF-8 mail as UTF-8 and mangle it.
function fixtureFiles(dir = `${root}/test/fixtures`): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    out[relative(dir, path)] = readFileSync(path).toString('base64');
  }
  return out;
}

/**
 * The worker tests as a vitest project: `shards` mail databases (DB, MAIL_DB_2, MAIL_DB_3, …;
 * worker/shards/), the files `include` names. vitest.config.ts is the suite with the shard count
 * of MAIL_SHARDS (one unless set); vitest.shards.config.ts a part of it with three, inside `npm test`.
 */
export function workerProject({ name, shards, include }: { name: string; shards: number; include: string[] }) {
  const extraShards = Object.fromEntries(
    mailShardBindings(shards)
      .slice(1)
      .map((binding, i) => [binding, `mailbox-${i + 2}`]),
  );
  return defineProject({
    plugins: [
      cloudflareTest(async () => ({
        wrangler: { configPath: `${root}/wrangler.toml` },
        miniflare: {
          // A small per-key limit, so a test can reach it (wrangler.toml has the production values).
          // Limits keyed by a constant are roomy here, since test files share them; the tests of those
          // limits use the TEST_ bindings, their own counters.
          ratelimits: {
            API_RATE_LIMIT: { namespace_id: '1001', simple: { limit: 30, period: 60 } },
            WORKSPACE_RATE_LIMIT: { namespace_id: '1002', simple: { limit: 100_000, period: 60 } },
            ADDRESS_RATE_LIMIT: { namespace_id: '1003', simple: { limit: 60, period: 60 } },
            KEY_CREATION_RATE_LIMIT: { namespace_id: '1004', simple: { limit: 1000, period: 60 } },
            TRACKING_RATE_LIMIT: { namespace_id: '1005', simple: { limit: 300, period: 60 } },
            TRACKING_REPEAT_LIMIT: { namespace_id: '1006', simple: { limit: 1, period: 60 } },
            MAIL_VIEW_RATE_LIMIT: { namespace_id: '1007', simple: { limit: 60, period: 60 } },
            TEST_WORKSPACE_RATE_LIMIT: { namespace_id: '1902', simple: { limit: 50, period: 60 } },
            TEST_KEY_CREATION_RATE_LIMIT: { namespace_id: '1904', simple: { limit: 5, period: 60 } },
          },
          ...(shards > 1 && { d1Databases: { DB: 'mailbox', ...extraShards } }),
          bindings: {
            ADMIN_API_KEY: 'test-admin-key',
            CREDENTIALS_KEY: 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=',
            GATEWAY_SECRET: 'test-gateway-secret',
            ALLOW_PRIVATE_WEBHOOK_URLS: 'true',
            ALLOW_PRIVATE_MAIL_HOSTS: 'true',
            ALLOW_PLAINTEXT_MAIL: 'true',
            TEST_MIGRATIONS: await readD1Migrations(`${root}/migrations`),
            TEST_FIXTURES: fixtureFiles(),
          },
        },
      })),
    ],
    test: {
      name,
      root,
      include,
      setupFiles: ['test/worker/setup.ts'],
      // Several accounts, syncs and deliveries per test: seconds on a loaded machine, not a hang.
      testTimeout: 30_000,
    },
  });
}
