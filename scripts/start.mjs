#!/usr/bin/env node
// `npm start`: the whole service on this machine. wrangler dev (local D1, R2, Queues, Durable
// Objects) on 127.0.0.1 plus the gateway. On first run it writes .dev.vars with fresh secrets.
// ADMIN_API_KEY, CREDENTIALS_KEY, GATEWAY_SECRET and PORT from the environment win over .dev.vars.
// START_GATEWAY=0 runs the Worker alone (for gateways run elsewhere). Ctrl-C stops everything.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gatewayCommand } from './gateway-command.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const devVarsPath = join(root, '.dev.vars');
const persistTo = process.env.PERSIST_TO ?? join(root, '.wrangler', 'state');
const wranglerBin = join(root, 'node_modules', 'wrangler', 'bin', 'wrangler.js');

function parseVars(text) {
  const vars = {};
  for (const line of text.split(/\r?\n/)) {
    const match = /^\s*([A-Z0-9_]+)\s*=\s*(.*)\s*$/.exec(line);
    if (match) vars[match[1]] = match[2].replace(/^"(.*)"$/, '$1');
  }
  return vars;
}

function ensureDevVars() {
  if (existsSync(devVarsPath)) return parseVars(readFileSync(devVarsPath, 'utf8'));
  const vars = {
    ADMIN_API_KEY: `mbx_admin_${randomBytes(24).toString('hex')}`,
    CREDENTIALS_KEY: randomBytes(32).toString('base64'),
    GATEWAY_SECRET: randomBytes(32).toString('hex'),
    ALLOW_PRIVATE_WEBHOOK_URLS: 'true',
  };
  const body = Object.entries(vars)
    .map(([k, v]) => `${k}="${v}"`)
    .join('\n');
  try {
    // `wx`: never over an existing file. Several `npm start` at once (the tests) must not rewrite it
    // under a wrangler already watching it: that reloads the Worker mid-test.
    writeFileSync(
      devVarsPath,
      `# Local secrets, written by npm start on first run. Never commit this file.\n${body}\n`,
      {
        mode: 0o600,
        flag: 'wx',
      },
    );
  } catch (err) {
    if (err.code === 'EEXIST') return parseVars(readFileSync(devVarsPath, 'utf8'));
    throw err;
  }
  console.log(`[start] wrote .dev.vars with fresh secrets. Your admin API key: ${vars.ADMIN_API_KEY}`);
  return vars;
}

const vars = ensureDevVars();
// Local development talks to a mail server on this machine (the tests' Dovecot and Postfix): private
// mail hosts and plaintext mail are allowed unless .dev.vars or the environment says otherwise.
vars.ALLOW_PRIVATE_MAIL_HOSTS ??= 'true';
vars.ALLOW_PLAINTEXT_MAIL ??= 'true';
for (const name of [
  'ADMIN_API_KEY',
  'CREDENTIALS_KEY',
  'CREDENTIALS_KEY_PREVIOUS',
  'GATEWAY_SECRET',
  'ALLOW_PRIVATE_WEBHOOK_URLS',
  'ALLOW_PRIVATE_MAIL_HOSTS',
  'ALLOW_PLAINTEXT_MAIL',
  'SEND_TIMEOUT_SECONDS',
  'SEND_QUEUE_LIMIT',
  'IDEMPOTENCY_ABANDONED_SECONDS',
  'GATEWAY_LEASE_TTL_SECONDS',
  'D1_METER',
]) {
  if (process.env[name]) vars[name] = process.env[name];
}
const port = process.env.PORT ?? '8787';
if (!/^\d+$/.test(port)) {
  console.error(`[start] PORT must be a number, got ${JSON.stringify(port)}`);
  process.exit(1);
}

function wrangler(args, options = {}) {
  return [
    process.execPath,
    [wranglerBin, ...args],
    { cwd: root, env: { ...process.env, WRANGLER_SEND_METRICS: 'false' }, ...options },
  ];
}

const migrate = spawnSync(
  ...wrangler(['d1', 'migrations', 'apply', 'DB', '--local', '--persist-to', persistTo], {
    stdio: 'inherit',
    input: 'y\n',
  }),
);
if (migrate.status !== 0) {
  console.error('[start] applying the local D1 migrations failed');
  process.exit(migrate.status ?? 1);
}

// Values given with --var win over .dev.vars, so the environment's overrides reach the Worker.
const overrides = Object.entries(vars).flatMap(([k, v]) => ['--var', `${k}:${v}`]);
const children = [];
const worker = spawn(
  ...wrangler(
    [
      'dev',
      '--ip',
      '127.0.0.1',
      '--port',
      port,
      '--persist-to',
      persistTo,
      '--show-interactive-dev-session=false',
      // Local dev runs no cron: GET /__scheduled runs the minute sweep now (tests, benchmarks, by hand).
      '--test-scheduled',
      ...overrides,
    ],
    { stdio: 'inherit', detached: true },
  ),
);
children.push(worker);

if (existsSync(join(root, 'gateway', 'main.ts')) && process.env.START_GATEWAY !== '0') {
  // The gateway gets this process's environment (NODE_EXTRA_CA_CERTS, GATEWAY_ID, …) plus where the
  // Worker is, and runs as `npm run gateway` does (its V8 flags and malloc settings: README "Configuration").
  const { env: gatewayEnv, args } = gatewayCommand(root);
  const gateway = spawn(process.execPath, args, {
    cwd: root,
    stdio: 'inherit',
    detached: true,
    env: {
      ...process.env,
      ...gatewayEnv,
      WORKER_URL: process.env.WORKER_URL ?? `http://127.0.0.1:${port}`,
      GATEWAY_SECRET: vars.GATEWAY_SECRET,
      ALLOW_PRIVATE_MAIL_HOSTS: vars.ALLOW_PRIVATE_MAIL_HOSTS,
    },
  });
  children.push(gateway);
}

let stopping = false;
function stop(code) {
  if (stopping) return;
  stopping = true;
  for (const child of children) {
    try {
      process.kill(-child.pid, 'SIGTERM');
    } catch {
      // already gone
    }
  }
  setTimeout(() => {
    for (const child of children) {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    process.exit(code);
  }, 3000).unref();
  void Promise.all(children.map((c) => (c.exitCode !== null ? null : new Promise((r) => c.once('exit', r))))).then(() =>
    process.exit(code),
  );
}

process.on('SIGINT', () => stop(0));
process.on('SIGTERM', () => stop(0));
for (const child of children) {
  child.once('exit', (code) => {
    if (!stopping) console.error(`[start] a child process exited (code ${code}); stopping the rest`);
    stop(code ?? 1);
  });
}
