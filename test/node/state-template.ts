/**
 * vitest globalSetup: the local D1 database with every migration applied, made once per run. Each
 * end-to-end file's `npm start` gets a copy as its state (test/node/service.ts), so its own
 * migration step finds nothing to do instead of applying every migration again: on a 2-core
 * machine that is about 20 s of CPU per file. Without this setup (benchmarks, the soak) every
 * `npm start` applies the migrations itself, as a user's does.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));

export default function setup(): () => void {
  const dir = mkdtempSync(join(tmpdir(), 'mailbox-state-template-'));
  const wrangler = join(root, 'node_modules', 'wrangler', 'bin', 'wrangler.js');
  const applied = spawnSync(
    process.execPath,
    [wrangler, 'd1', 'migrations', 'apply', 'DB', '--local', '--persist-to', dir],
    { cwd: root, input: 'y\n', encoding: 'utf8', env: { ...process.env, WRANGLER_SEND_METRICS: 'false' } },
  );
  if (applied.status !== 0)
    throw new Error(`applying the migrations for the tests failed:\n${applied.stdout}${applied.stderr}`);
  process.env.E2E_STATE_TEMPLATE = dir;
  return () => {
    delete process.env.E2E_STATE_TEMPLATE;
    rmSync(dir, { recursive: true, force: true });
  };
}
