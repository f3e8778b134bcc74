import { env } from 'cloudflare:workers';
import { beforeEach, describe, expect, it } from 'vitest';
import { api, expectError } from './helpers.ts';

describe('API keys and authentication', () => {
  beforeEach(async () => {
    await env.DB.exec('DELETE FROM api_keys');
  });

  it('refuses requests without, or with a wrong, X-API-KEY in the error shape', async () => {
    const missing = expectError(await api('GET', '/api-keys', { key: null }), 401, 'unauthorized');
    expect(missing.title).toBe('Unauthorized');
    expectError(await api('GET', '/api-keys', { key: 'mbx_not-a-real-key' }), 401, 'unauthorized');
  });

  it('accepts the admin key and lists keys in the list envelope', async () => {
    const res = await api('GET', '/api-keys');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ object: 'ApiKeys', data: [], has_more: false });
  });

  it('creates a key that is shown once, works, is listed without its value, and dies when revoked', async () => {
    const created = await api('POST', '/api-keys', { body: { name: 'ci' } });
    expect(created.status).toBe(200);
    const key: string = created.body.key;
    expect(created.body).toMatchObject({ object: 'ApiKey', name: 'ci', role: 'service', last_used_at: null });
    expect(created.body.id).toMatch(/^pk_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(key.startsWith(created.body.prefix)).toBe(true);
    expect(key.length).toBeGreaterThan(created.body.prefix.length + 20);

    const withNewKey = await api('GET', '/api-keys', { key });
    expect(withNewKey.status).toBe(200);
    expect(withNewKey.body.data).toHaveLength(1);
    const listed = withNewKey.body.data[0];
    expect(listed).not.toHaveProperty('key');
    expect(JSON.stringify(withNewKey.body)).not.toContain(key);
    expect(listed).toMatchObject({ id: created.body.id, prefix: created.body.prefix, name: 'ci' });

    const revoked = await api('DELETE', `/api-keys/${created.body.id}`);
    expect(revoked.status).toBe(200);
    expect(revoked.body).toEqual({ object: 'ApiKeyDeleted', id: created.body.id });
    expectError(await api('GET', '/api-keys', { key }), 401, 'unauthorized');
    expect((await api('GET', '/api-keys')).body.data).toEqual([]);
    expectError(await api('DELETE', `/api-keys/${created.body.id}`), 404, 'not_found');
  });

  it('stores only hashes of keys, never their values', async () => {
    const keys: string[] = [];
    for (const name of ['one', 'two']) keys.push((await api('POST', '/api-keys', { body: { name } })).body.key);
    const { results } = await env.DB.prepare('SELECT * FROM api_keys').all<Record<string, unknown>>();
    expect(results).toHaveLength(2);
    const stored = JSON.stringify(results);
    for (const key of keys) {
      expect(stored).not.toContain(key);
      // The prefix is stored, but nothing past it.
      expect(stored).not.toContain(key.slice(0, 16));
    }
    for (const row of results) expect(row.key_hash).toMatch(/^[0-9a-f]{64}$/);
    // Every table in the database: no key value anywhere.
    const tables = await env.DB.prepare(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_%' ESCAPE '\\'",
    ).all<{ name: string }>();
    for (const { name } of tables.results) {
      if (name.startsWith('sqlite_') || name === 'd1_migrations') continue;
      const dump = JSON.stringify((await env.DB.prepare(`SELECT * FROM "${name}"`).all()).results);
      for (const key of keys) expect(dump).not.toContain(key);
    }
  });

  it('records last_used_at without writing on every request', async () => {
    const { body } = await api('POST', '/api-keys', { body: { name: 'used' } });
    await api('GET', '/api-keys', { key: body.key });
    await new Promise((r) => setTimeout(r, 50)); // the write happens in waitUntil
    const first = await env.DB.prepare('SELECT last_used_at FROM api_keys WHERE id = ?')
      .bind(body.id)
      .first<{ last_used_at: string }>();
    expect(first?.last_used_at).toBeTruthy();
    await api('GET', '/api-keys', { key: body.key });
    await new Promise((r) => setTimeout(r, 50));
    const second = await env.DB.prepare('SELECT last_used_at FROM api_keys WHERE id = ?')
      .bind(body.id)
      .first<{ last_used_at: string }>();
    expect(second?.last_used_at).toBe(first?.last_used_at);
  });

  it.each([
    ['a 101-character name', { name: 'x'.repeat(101) }, 'name'],
    ['an empty name', { name: '' }, 'name'],
    ['a missing name', {}, 'name'],
    ['an unknown field', { name: 'ok', scope: 'all' }, 'scope'],
  ])('refuses %s with 400 naming the parameter', async (_label, body, param) => {
    const error = expectError(await api('POST', '/api-keys', { body }), 400, 'invalid_parameters');
    expect(error.detail).toContain(param);
  });

  it.each([
    ['limit=0', 'limit'],
    ['limit=251', 'limit'],
    ['limit=abc', 'limit'],
    ['offset=-1', 'offset'],
    ['offset=1.5', 'offset'],
  ])('refuses %s with 400 naming the parameter', async (query, param) => {
    const error = expectError(await api('GET', `/api-keys?${query}`), 400, 'invalid_parameters');
    expect(error.detail).toContain(param);
    expect(error.detail).toMatch(/integer/);
  });

  it('pages with limit and offset', async () => {
    for (let i = 0; i < 5; i++) await api('POST', '/api-keys', { body: { name: `k${i}` } });
    const first = await api('GET', '/api-keys?limit=2');
    expect(first.body.data.map((k: any) => k.name)).toEqual(['k4', 'k3']);
    expect(first.body.has_more).toBe(true);
    const last = await api('GET', '/api-keys?limit=2&offset=4');
    expect(last.body.data.map((k: any) => k.name)).toEqual(['k0']);
    expect(last.body.has_more).toBe(false);
  });
});

describe('rate limiting per API key', () => {
  it('answers 429 rate_limited with Retry-After once a key exceeds its budget, for that key only', async () => {
    const busy = (await api('POST', '/api-keys', { body: { name: 'busy' } })).body.key as string;
    const calm = (await api('POST', '/api-keys', { body: { name: 'calm' } })).body.key as string;
    let limited: Awaited<ReturnType<typeof api>> | null = null;
    for (let i = 0; i < 40 && !limited; i++) {
      const res = await api('GET', '/api-keys?limit=1', { key: busy });
      if (res.status === 429) limited = res;
      else expect(res.status).toBe(200);
    }
    expect(limited).not.toBeNull();
    const error = expectError(limited!, 429, 'rate_limited');
    expect(error.detail).toMatch(/Retry-After/);
    expect(Number(limited!.headers.get('Retry-After'))).toBeGreaterThan(0);
    expect((await api('GET', '/api-keys?limit=1', { key: calm })).status).toBe(200);
    expect((await api('GET', '/api-keys?limit=1')).status).toBe(200); // the admin key is the operator's
  });
});
