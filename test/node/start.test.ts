// `npm start` as a user runs it: real wrangler dev (workerd), real HTTP.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mailShardBindings, mailShardCount } from '../../scripts/mail-shards.mjs';
import { openD1Files } from './d1-files.ts';
import { freePort, waitForHttp } from './helpers.ts';

const ADMIN = 'k';
let child: ChildProcess;
let base: string;
let stateDir: string;

beforeAll(async () => {
  const port = await freePort();
  stateDir = mkdtempSync(join(tmpdir(), 'mailbox-start-'));
  base = `http://127.0.0.1:${port}/api/v1`;
  child = spawn('npm', ['start'], {
    env: { ...process.env, ADMIN_API_KEY: ADMIN, PORT: String(port), PERSIST_TO: stateDir, START_GATEWAY: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  child.stdout?.resume();
  child.stderr?.resume();
  // From an empty state it applies every migration to every database: three of them with MAIL_SHARDS=3.
  await waitForHttp(`http://127.0.0.1:${port}/`, 240_000);
});

afterAll(async () => {
  if (child.exitCode === null && child.signalCode === null) {
    process.kill(-child.pid!, 'SIGINT');
    await new Promise((r) => child.once('exit', r));
  }
  rmSync(stateDir, { recursive: true, force: true });
});

const call = (method: string, path: string, key?: string, body?: unknown) =>
  fetch(`${base}${path}`, {
    method,
    headers: { ...(key ? { 'X-API-KEY': key } : {}), ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });

describe('npm start', () => {
  it('serves the API with the admin key from the environment', async () => {
    const anonymous = await call('GET', '/api-keys');
    expect(anonymous.status).toBe(401);
    expect(await anonymous.json()).toMatchObject({ status: 401, type: 'errors/unauthorized', title: 'Unauthorized' });
    const listed = await call('GET', '/api-keys', ADMIN);
    expect(listed.status).toBe(200);
    expect(await listed.json()).toEqual({ object: 'ApiKeys', data: [], has_more: false });
  });

  it('creates, uses, lists and revokes a key over real HTTP', async () => {
    const created = (await (await call('POST', '/api-keys', ADMIN, { name: 'ci' })).json()) as {
      id: string;
      key: string;
    };
    expect((await call('GET', '/api-keys', created.key)).status).toBe(200);
    const list = await (await call('GET', '/api-keys', created.key)).text();
    expect(list).not.toContain(created.key);
    expect((await call('DELETE', `/api-keys/${created.id}`, ADMIN)).status).toBe(200);
    expect((await call('GET', '/api-keys', created.key)).status).toBe(401);
    for (const query of ['limit=0', 'limit=251', 'limit=abc', 'offset=-1']) {
      const res = await call('GET', `/api-keys?${query}`, ADMIN);
      expect(res.status).toBe(400);
      expect(((await res.json()) as { detail: string }).detail).toContain(query.split('=')[0]);
    }
    expect((await call('POST', '/api-keys', ADMIN, { name: 'x'.repeat(101) })).status).toBe(400);
  });

  it('answers unknown paths and malformed ids with 404', async () => {
    for (const path of ['/nowhere', '/accounts/nope', '/accounts/we_01HZZZZZZZZZZZZZZZZZZZZZZZ']) {
      const res = await call('GET', path, ADMIN);
      expect(res.status).toBe(404);
      expect(await res.json()).toMatchObject({ type: 'errors/not_found' });
    }
  });

  it('applies every migration to each database it binds (DB, and MAIL_DB_2, … with MAIL_SHARDS)', () => {
    const migrations = readdirSync(new URL('../../migrations', import.meta.url))
      .filter((file) => file.endsWith('.sql'))
      .sort();
    const databases = openD1Files(stateDir);
    try {
      const applied = [...databases].map(([binding, db]) => [
        binding,
        db
          .prepare('SELECT name FROM d1_migrations ORDER BY id')
          .all()
          .map((row) => row.name),
      ]);
      const bindings = mailShardBindings(mailShardCount(process.env.MAIL_SHARDS) ?? 1);
      expect(applied).toEqual(bindings.map((binding) => [binding, migrations]));
    } finally {
      for (const db of databases.values()) db.close();
    }
  });

  it('stops wrangler and its children on Ctrl-C', async () => {
    process.kill(-child.pid!, 'SIGINT');
    const [code, signal] = await new Promise<[number | null, string | null]>((r) =>
      child.once('exit', (c, s) => r([c, s])),
    );
    // npm itself dies of the SIGINT; what matters is that nothing keeps serving.
    expect(code === 0 || signal === 'SIGINT').toBe(true);
    await new Promise((r) => setTimeout(r, 3500));
    await expect(fetch(base.replace('/api/v1', '/'))).rejects.toThrow();
  });
});
