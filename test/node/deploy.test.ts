import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { readBindings } from '../../scripts/deploy.mjs';

it('builds the deployable bundle with `wrangler deploy --dry-run`', () => {
  const outdir = mkdtempSync(join(tmpdir(), 'mailbox-bundle-'));
  try {
    const run = spawnSync('npx', ['wrangler', 'deploy', '--dry-run', '--outdir', outdir], {
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(run.status, run.stderr + run.stdout).toBe(0);
    const bundle = join(outdir, 'index.js');
    expect(existsSync(bundle)).toBe(true);
    expect(statSync(bundle).size).toBeGreaterThan(10_000);
    expect(readdirSync(outdir)).toContain('index.js');
    expect(run.stdout).toMatch(/ACCOUNTS|AccountObject/);
    // The dashboard is built by the [build] hook and shipped as static assets.
    expect(run.stdout).toContain('[custom build] Running: node scripts/build-dashboard.mjs');
    expect(run.stdout).toMatch(/Read \d+ files from the assets directory/);
    expect(existsSync(join('dist', 'dashboard', 'app.js'))).toBe(true);
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
});

it('`npm run deploy -- --dry-run` checks the configuration and the bundle, creates nothing and prints no secret', () => {
  // No Cloudflare account here: a call to the API would fail (and must not be made).
  const env = { ...process.env, CLOUDFLARE_API_TOKEN: '', CLOUDFLARE_ACCOUNT_ID: '' };
  const run = spawnSync('npm', ['run', 'deploy', '--', '--dry-run'], { encoding: 'utf8', timeout: 180_000, env });
  const out = run.stdout + run.stderr;
  expect(run.status, out).toBe(0);
  expect(out).toMatch(
    /Worker "mailbox-edge": D1 "mailbox", R2 "mailbox-blobs", queue "mailbox-webhooks", \d+ migrations/,
  );
  const size = /bundle: [\d.]+ MiB, ([\d.]+) MiB compressed/.exec(out);
  expect(size, out).not.toBeNull();
  expect(Number(size![1])).toBeGreaterThan(0.05);
  expect(Number(size![1])).toBeLessThan(3);
  expect(out).toContain('dry run: nothing was created');
  expect(out).toContain('ADMIN_API_KEY, CREDENTIALS_KEY, GATEWAY_SECRET');
  expect(out).not.toMatch(/mbx_admin_[0-9a-f]{16}/);
});

it('reads the bindings deploy needs from wrangler.toml, and has no placeholder database id', () => {
  const toml = `name = "w"\n[[d1_databases]]\nbinding = "DB"\ndatabase_name = "mailbox"\n\n[[r2_buckets]]\nbucket_name = "b"\n\n[[queues.producers]]\nqueue = "q"\n`;
  expect(readBindings(toml)).toEqual({
    name: 'w',
    database: 'mailbox',
    databaseId: null,
    bucket: 'b',
    queue: 'q',
    shards: [],
  });
  const sharded = `${toml}\n[[d1_databases]]\nbinding = "MAIL_DB_2"\ndatabase_name = "mailbox-2"\nmigrations_dir = "migrations"\n`;
  expect(readBindings(sharded).shards).toEqual([{ binding: 'MAIL_DB_2', database: 'mailbox-2' }]);
});
