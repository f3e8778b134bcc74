import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';

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
