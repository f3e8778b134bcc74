/**
 * The local D1 state that every end-to-end `npm start` starts from. The vitest globalSetup (the
 * default export) applies every migration to DB once per run; `copyStateTemplate` gives each
 * `npm start` of a test (test/node/service.ts) a copy, with the same migrated database for each mail
 * shard (MAIL_SHARDS), so its own migration step finds nothing to do instead of applying every
 * migration to every database again: on a 2-core machine that is about 20 s of CPU per database and
 * file. Without this setup (benchmarks, the soak) every `npm start` applies the migrations itself, as
 * a user's does.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, cpSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { mailShardBindings, mailShardCount } from '../../scripts/mail-shards.mjs';
import { d1FileName, d1Folder, DIRECTORY } from './d1-files.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

export default function setup(): () => void {
  const dir = mkdtempSync(join(tmpdir(), 'mailbox-state-template-'));
  const wrangler = join(root, 'node_modules', 'wrangler', 'bin', 'wrangler.js');
  const applied = spawnSync(
    process.execPath,
    [wrangler, 'd1', 'migrations', 'apply', DIRECTORY, '--local', '--persist-to', dir],
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

/**
 * Fill the empty state folder of an `npm start` with `MAIL_SHARDS` (its value; unset: one) from the
 * run's template, when there is one: DB as migrated, and each other shard's database a copy of it.
 * That copy is what migrating the shard makes, as every shard has the same migrations
 * (scripts/start.mjs), including their record in d1_migrations; a shard added later by a restart with
 * more MAIL_SHARDS is migrated by `npm start`, as a user's is.
 */
export function copyStateTemplate(stateDir: string, mailShards: string | undefined): void {
  const template = process.env.E2E_STATE_TEMPLATE;
  if (!template) return;
  cpSync(template, stateDir, { recursive: true });
  const folder = d1Folder(stateDir);
  const migrated = d1FileName(DIRECTORY);
  // The database and SQLite's -wal and -shm files beside it (nothing has it open: it is a copy).
  const files = readdirSync(folder).filter((file) => file.startsWith(migrated));
  for (const binding of mailShardBindings(mailShardCount(mailShards) ?? 1).slice(1))
    for (const file of files)
      copyFileSync(join(folder, file), join(folder, file.replace(migrated, d1FileName(binding))));
}
