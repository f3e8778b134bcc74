#!/usr/bin/env node
// `npm run deploy`: the Worker on Cloudflare in one command. Checks wrangler and wrangler.toml,
// builds the bundle and checks it against Cloudflare's size limit, creates the webhook queue when
// it is missing (wrangler creates D1 and R2 from their bindings at deploy), generates the Worker
// secrets that are not set yet and uploads them with the deploy, applies the D1 migrations remotely,
// and prints the Worker's URL and the secrets it made: once, they are not stored anywhere else.
//
// `npm run deploy -- --dry-run` does everything that needs no Cloudflare account (the checks and
// the bundle) and says what it would do.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
/** Provisioning of D1 and R2 bindings without ids at deploy. */
const MIN_WRANGLER = [4, 45, 0];
/** Cloudflare's limit on a Worker's compressed size: 3 MB on the Free plan, 10 MB on Paid. */
export const BUNDLE_LIMITS = { free: 3 * 1024 * 1024, paid: 10 * 1024 * 1024 };

/** The secrets the Worker needs, each with how a new one is made. */
const SECRETS = {
  ADMIN_API_KEY: () => `mbx_admin_${randomBytes(24).toString('hex')}`,
  CREDENTIALS_KEY: () => randomBytes(32).toString('base64'),
  GATEWAY_SECRET: () => randomBytes(32).toString('hex'),
};

class DeployError extends Error {}

/** Runs wrangler (through npx: the project's Node) and returns what it printed; throws unless `allowFail`. */
function wrangler(args, { allowFail = false, quiet = false } = {}) {
  const run = spawnSync('npx', ['wrangler', ...args], { cwd: root, encoding: 'utf8', env: process.env });
  const out = `${run.stdout ?? ''}${run.stderr ?? ''}`;
  if (!quiet) process.stdout.write(out);
  if (run.status !== 0 && !allowFail)
    throw new DeployError(`wrangler ${args[0]} ${args[1] ?? ''} failed (exit ${run.status})`);
  return { ok: run.status === 0, out, stdout: run.stdout ?? '' };
}

function checkWranglerVersion() {
  const { out } = wrangler(['--version'], { quiet: true });
  const version = /(\d+)\.(\d+)\.(\d+)/.exec(out);
  if (!version) throw new DeployError(`could not read wrangler's version from: ${out.trim()}`);
  const parts = version.slice(1).map(Number);
  const older = parts.findIndex((n, i) => n !== MIN_WRANGLER[i]);
  if (older !== -1 && parts[older] < MIN_WRANGLER[older])
    throw new DeployError(
      `wrangler ${version[0]} is too old: ${MIN_WRANGLER.join('.')} or newer creates D1 and R2 at deploy`,
    );
  return version[0];
}

/** What wrangler.toml binds, read with the few patterns this file uses (no TOML parser needed). */
export function readBindings(toml) {
  const value = (section, key) => {
    const at = toml.indexOf(`[[${section}]]`);
    if (at === -1) return null;
    const next = toml.indexOf('[', toml.indexOf('\n', at) + 1);
    const body = toml.slice(at, next === -1 ? undefined : next);
    return new RegExp(`^${key}\\s*=\\s*"([^"]*)"`, 'm').exec(body)?.[1] ?? null;
  };
  return {
    name: /^name\s*=\s*"([^"]+)"/m.exec(toml)?.[1] ?? null,
    database: value('d1_databases', 'database_name'),
    databaseId: value('d1_databases', 'database_id'),
    bucket: value('r2_buckets', 'bucket_name'),
    queue: value('queues.producers', 'queue'),
    shards: mailShards(toml),
  };
}

/** The mail shards besides DB (docs/capacity.md): each `[[d1_databases]]` bound as MAIL_DB_n, with its database. */
function mailShards(toml) {
  return toml
    .split('[[d1_databases]]')
    .slice(1)
    .map((section) => section.slice(0, section.search(/^\[/m) === -1 ? undefined : section.search(/^\[/m)))
    .map((body) => ({
      binding: /^binding\s*=\s*"([^"]*)"/m.exec(body)?.[1] ?? '',
      database: /^database_name\s*=\s*"([^"]*)"/m.exec(body)?.[1] ?? '',
    }))
    .filter((s) => /^MAIL_DB_[0-9]+$/.test(s.binding));
}

function checkConfig() {
  const bindings = readBindings(readFileSync(join(root, 'wrangler.toml'), 'utf8'));
  for (const [what, value] of Object.entries(bindings))
    if (what !== 'databaseId' && what !== 'shards' && !value) throw new DeployError(`wrangler.toml: no ${what} found`);
  if (bindings.databaseId && /^0{8}-/.test(bindings.databaseId))
    throw new DeployError(
      'wrangler.toml: database_id is a placeholder: remove the line (wrangler creates the database) or put the real id',
    );
  const migrations = readdirSync(join(root, 'migrations'))
    .filter((f) => f.endsWith('.sql'))
    .sort();
  const numbers = migrations.map((f) => Number(f.slice(0, 4)));
  if (new Set(numbers).size !== numbers.length) throw new DeployError('migrations/: two migrations share a number');
  return { ...bindings, migrations: migrations.length };
}

/** Builds the bundle as `wrangler deploy` would and measures it; throws when it is over the Paid limit. */
export function buildBundle() {
  const outdir = mkdtempSync(join(tmpdir(), 'mailbox-deploy-'));
  try {
    wrangler(['deploy', '--dry-run', '--outdir', outdir], { quiet: true });
    let raw = 0;
    const chunks = [];
    for (const file of readdirSync(outdir, { recursive: true })) {
      const path = join(outdir, String(file));
      if (!statSync(path).isFile() || String(file).endsWith('.map') || String(file).endsWith('.json')) continue;
      const bytes = readFileSync(path);
      raw += bytes.length;
      chunks.push(bytes);
    }
    const compressed = gzipSync(Buffer.concat(chunks), { level: 9 }).length;
    if (compressed > BUNDLE_LIMITS.paid)
      throw new DeployError(`the bundle is ${compressed} bytes compressed, over Cloudflare's 10 MB limit`);
    return { raw, compressed };
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}

const mb = (bytes) => `${(bytes / 1024 / 1024).toFixed(2)} MiB`;

/** Secrets already set on the Worker (none when it does not exist yet). */
function secretsSet() {
  const { ok, stdout } = wrangler(['secret', 'list', '--format', 'json'], { allowFail: true, quiet: true });
  if (!ok) return new Set();
  try {
    return new Set(JSON.parse(stdout).map((s) => s.name));
  } catch {
    return new Set();
  }
}

function ensureQueue(queue) {
  const { out } = wrangler(['queues', 'list'], { quiet: true });
  if (new RegExp(`\\b${queue}\\b`).test(out)) return false;
  wrangler(['queues', 'create', queue]);
  return true;
}

function databaseExists(database) {
  const { ok, stdout } = wrangler(['d1', 'list', '--json'], { allowFail: true, quiet: true });
  if (!ok) return false;
  try {
    return JSON.parse(stdout).some((d) => d.name === database);
  } catch {
    return false;
  }
}

async function main() {
  const dryRun = process.argv.includes('--dry-run');
  const version = checkWranglerVersion();
  const config = checkConfig();
  console.log(
    `wrangler ${version}; Worker "${config.name}": D1 "${config.database}", R2 "${config.bucket}", queue "${config.queue}", ${config.migrations} migrations`,
  );
  const bundle = buildBundle();
  console.log(
    `bundle: ${mb(bundle.raw)}, ${mb(bundle.compressed)} compressed (limits: ${mb(BUNDLE_LIMITS.free)} Free, ${mb(BUNDLE_LIMITS.paid)} Paid)`,
  );
  if (bundle.compressed > BUNDLE_LIMITS.free)
    console.log('  over the Free plan limit: deploying needs the Workers Paid plan');
  if (dryRun) {
    console.log(
      [
        'dry run: nothing was created. `npm run deploy` would now:',
        `  create the queue "${config.queue}" when missing (D1 "${config.database}" and R2 "${config.bucket}" are created by wrangler at deploy)`,
        `  generate and set the secrets not set yet: ${Object.keys(SECRETS).join(', ')}`,
        '  apply the D1 migrations remotely, deploy, and print the URL and the new secrets once',
      ].join('\n'),
    );
    return;
  }
  if (!wrangler(['whoami'], { allowFail: true, quiet: true }).ok)
    throw new DeployError('not logged in to Cloudflare: run `npx wrangler login` (or set CLOUDFLARE_API_TOKEN) first');
  if (ensureQueue(config.queue)) console.log(`created the queue ${config.queue}`);
  const existing = secretsSet();
  const made = Object.fromEntries(
    Object.entries(SECRETS)
      .filter(([name]) => !existing.has(name))
      .map(([name, make]) => [name, make()]),
  );
  const hadDatabase = databaseExists(config.database);
  // The schema first when the database exists; a new one is created by the deploy, then migrated.
  if (hadDatabase) wrangler(['d1', 'migrations', 'apply', 'DB', '--remote']);
  // Every mail shard gets the same migrations, before the deploy when it exists, else after.
  const shardsBefore = config.shards.filter((shard) => databaseExists(shard.database));
  for (const shard of shardsBefore) wrangler(['d1', 'migrations', 'apply', shard.binding, '--remote']);
  const secretsDir = mkdtempSync(join(tmpdir(), 'mailbox-secrets-'));
  const secretsFile = join(secretsDir, 'secrets.json');
  let deployed;
  try {
    writeFileSync(secretsFile, JSON.stringify(made), { mode: 0o600 });
    deployed = wrangler(['deploy', ...(Object.keys(made).length ? ['--secrets-file', secretsFile] : [])]);
  } finally {
    rmSync(secretsDir, { recursive: true, force: true });
  }
  if (!hadDatabase) wrangler(['d1', 'migrations', 'apply', 'DB', '--remote']);
  for (const shard of config.shards.filter((s) => !shardsBefore.includes(s)))
    wrangler(['d1', 'migrations', 'apply', shard.binding, '--remote']);
  const url = /https:\/\/\S+\.workers\.dev/.exec(deployed.out)?.[0] ?? "(see wrangler's output above)";
  console.log(`\nDeployed: ${url}`);
  console.log(`Dashboard: ${url}/   API: ${url}/api/v1   Reference: ${url}/api/v1/docs`);
  if (Object.keys(made).length) {
    console.log('\nNew secrets, shown this once (keep them; Cloudflare shows them to no one):');
    for (const [name, value] of Object.entries(made)) if (name !== 'CREDENTIALS_KEY') console.log(`  ${name}=${value}`);
    console.log('  (CREDENTIALS_KEY was set too: it encrypts stored passwords and never needs to leave the Worker)');
  }
  console.log(`\nStart a gateway: WORKER_URL=${url} GATEWAY_SECRET=<the gateway secret> npm run gateway`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    await main();
  } catch (err) {
    if (!(err instanceof DeployError)) throw err;
    console.error(`deploy: ${err.message}`);
    process.exit(1);
  }
}
