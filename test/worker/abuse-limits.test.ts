/**
 * Limits before storage: what a flood from outside costs D1. Each request goes through the app with
 * a metered env (metered.ts), so the D1 queries and Durable Object calls of every single request
 * are counted. The limiters are the real Rate Limiting bindings of workerd (windows aligned to the
 * wall clock, so a run that crosses a minute gets a second budget: the counts allow for it).
 */
import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { beforeEach, describe, expect, it } from 'vitest';
import { createApp } from '../../worker/app.ts';
import type { Env } from '../../worker/env.ts';
import { openUrl } from '../../worker/tracking/links.ts';
import { ADMIN_KEY, expectError } from './helpers.ts';
import { type Meter, meteredEnv, newMeter } from './metered.ts';
import { insertTrackedSend } from './webhook-helpers.ts';

const app = createApp();

interface Answer {
  status: number;
  body: any;
  headers: Headers;
  meter: Meter;
}

/** One request from `address`, with its own meter (the waitUntil work included). */
async function send(
  url: string,
  init: RequestInit & { address: string },
  overrides: Partial<Env> = {},
): Promise<Answer> {
  const meter = newMeter();
  const headers = new Headers(init.headers);
  headers.set('CF-Connecting-IP', init.address);
  const ctx = createExecutionContext();
  const response = await app.fetch(
    new Request(url, { ...init, headers }),
    meteredEnv({ ...env, ...overrides } as Env, meter),
    ctx,
  );
  const json = response.headers.get('Content-Type')?.includes('json');
  const body: unknown = json ? await response.json() : await response.arrayBuffer();
  await waitOnExecutionContext(ctx);
  return { status: response.status, body, headers: response.headers, meter };
}

const apiCall = (path: string, key: string | null, address: string, init: RequestInit = {}, overrides = {}) =>
  send(
    `https://mail.example.com/api/v1${path}`,
    {
      ...init,
      address,
      headers: { ...(key === null ? {} : { 'X-API-KEY': key }), 'Content-Type': 'application/json' },
    },
    overrides,
  );

/** Runs `count` calls, `parallel` at a time. */
async function flood(count: number, parallel: number, call: (i: number) => Promise<Answer>): Promise<Answer[]> {
  const answers: Answer[] = [];
  for (let start = 0; start < count; start += parallel) {
    const batch = Array.from({ length: Math.min(parallel, count - start) }, (_, i) => call(start + i));
    answers.push(...(await Promise.all(batch)));
  }
  return answers;
}

function expectRateLimited(answer: Answer, detail: RegExp) {
  const error = expectError(answer, 429, 'rate_limited');
  expect(error.detail).toMatch(detail);
  expect(Number(answer.headers.get('Retry-After'))).toBe(60);
}

async function createKey(name: string, overrides: Partial<Env> = {}) {
  return apiCall('/api-keys', ADMIN_KEY, '192.0.2.1', { method: 'POST', body: JSON.stringify({ name }) }, overrides);
}

describe('requests without a valid key', () => {
  it('3,000 wrong keys from one address: 429 after the limit, without a D1 query; other addresses unaffected', {
    timeout: 180_000,
  }, async () => {
    const answers = await flood(3000, 100, (i) => apiCall('/emails', `mbx_wrong${i}`, '198.51.100.7'));
    const refused = answers.filter((a) => a.status === 429);
    const lookedUp = answers.filter((a) => a.status === 401);
    expect(refused.length + lookedUp.length).toBe(3000);
    // The test limit is 60 a minute (vitest.config.ts); a run across a minute boundary gets two.
    expect(lookedUp.length).toBeGreaterThanOrEqual(60);
    expect(lookedUp.length).toBeLessThanOrEqual(120);
    for (const a of lookedUp) expect(a.meter.d1).toBe(1);
    for (const a of refused) expect(a.meter).toMatchObject({ d1: 0, subrequests: 0 });
    expectRateLimited(refused[0]!, /without a valid API key/);
    // The first 60 are the ones looked up: the limit runs before the lookup.
    expect(answers.slice(0, 60).every((a) => a.status === 401)).toBe(true);

    // No key at all counts against the same budget; a valid key from another address works.
    const missing = await apiCall('/emails', null, '198.51.100.7');
    expectRateLimited(missing, /without a valid API key/);
    expect(missing.meter.d1).toBe(0);
    const key = (await createKey('elsewhere')).body.key as string;
    const elsewhere = await apiCall('/api-keys?limit=1', key, '203.0.113.9');
    expect(elsewhere.status).toBe(200);
  });

  it('a valid key keeps its own budget at an address whose wrong-key budget is spent', async () => {
    const key = (await createKey('same-address')).body.key as string;
    // Known valid first, then the address's budget is used up by wrong keys.
    expect((await apiCall('/api-keys?limit=1', key, '198.51.100.8')).status).toBe(200);
    const wrong = await flood(70, 35, (i) => apiCall('/api-keys', `mbx_x${i}`, '198.51.100.8'));
    expect(wrong.some((a) => a.status === 429)).toBe(true);
    for (let i = 0; i < 10; i++) expect((await apiCall('/api-keys?limit=1', key, '198.51.100.8')).status).toBe(200);
  });
});

describe('valid keys', () => {
  beforeEach(async () => {
    await env.DB.exec('DELETE FROM api_keys');
  });

  it('share a workspace-wide ceiling on top of their own', async () => {
    const ceiling = { WORKSPACE_RATE_LIMIT: env.TEST_WORKSPACE_RATE_LIMIT }; // 50 a minute
    const names = ['a', 'b', 'c', 'd', 'e'];
    const keys = await Promise.all(names.map(async (n) => (await createKey(n)).body.key as string));
    // 25 requests per key: each stays under its own 30; together they pass the 50 (100 across a minute).
    const answers = await flood(125, 25, (i) => apiCall('/api-keys?limit=1', keys[i % 5]!, '192.0.2.2', {}, ceiling));
    const refused = answers.filter((a) => a.status === 429);
    expect(answers.filter((a) => a.status === 200).length).toBeLessThanOrEqual(100);
    expect(refused.length).toBe(125 - answers.filter((a) => a.status === 200).length);
    expectRateLimited(refused[0]!, /in this workspace/);
  });

  it('are capped in number (MAX_API_KEYS) and in how fast they are made', async () => {
    const cap = { MAX_API_KEYS: '3' };
    const made = [];
    for (const name of ['one', 'two', 'three']) made.push(await createKey(name, cap));
    expect(made.map((a) => a.status)).toEqual([200, 200, 200]);
    expectRateLimited(await createKey('four', cap), /3 live API keys/);
    expect((await env.DB.prepare('SELECT COUNT(*) AS n FROM api_keys').first<{ n: number }>())?.n).toBe(3);
    await apiCall(`/api-keys/${made[0]!.body.id}`, ADMIN_KEY, '192.0.2.1', { method: 'DELETE' });
    expect((await createKey('four', cap)).status).toBe(200);

    const pace = { KEY_CREATION_RATE_LIMIT: env.TEST_KEY_CREATION_RATE_LIMIT }; // 5 a minute
    const created = [];
    for (let i = 0; i < 11; i++) created.push(await createKey(`paced${i}`, pace));
    const refused = created.filter((a) => a.status === 429);
    expect(refused.length).toBeGreaterThan(0);
    expect(created.filter((a) => a.status === 200).length).toBeLessThanOrEqual(10);
    expectRateLimited(refused[0]!, /API keys created/);
  });
});

describe('tracking hits', () => {
  it('2,000 hits of one pixel from one address: 429 after the limit, one pass through D1, one event', {
    timeout: 180_000,
  }, async () => {
    const trackingId = await insertTrackedSend();
    const pixel = await openUrl(env, 'https://mail.example.com', trackingId);
    const answers = await flood(2000, 100, () => send(pixel, { address: '198.51.100.20' }));
    const served = answers.filter((a) => a.status === 200);
    const refused = answers.filter((a) => a.status === 429);
    expect(served.length + refused.length).toBe(2000);
    // The test limit is 300 a minute; a run across a minute boundary gets two.
    expect(served.length).toBeGreaterThanOrEqual(300);
    expect(served.length).toBeLessThanOrEqual(600);
    for (const a of refused) expect(a.meter).toMatchObject({ d1: 0, subrequests: 0 });
    expectRateLimited(refused[0]!, /tracking hits/);
    // Only the first hit of the address on this link in a minute reaches D1: at most two passes
    // (a minute boundary), each at most 6 queries (the lookup, two window upserts, the email, the
    // event, and its dispatch's read), 4 of them writes at most.
    const reachedD1 = served.filter((a) => a.meter.d1 > 0);
    expect(reachedD1.length).toBeGreaterThanOrEqual(1);
    expect(reachedD1.length).toBeLessThanOrEqual(2);
    const total = answers.reduce((sum, a) => sum + a.meter.d1, 0);
    console.log(`2,000 hits of one pixel from one address: ${served.length} served, ${total} D1 queries in all`);
    expect(total).toBeLessThanOrEqual(12);
    const events = await env.DB.prepare(
      "SELECT type FROM events WHERE type LIKE 'tracking.%' AND json_extract(data_json, '$.tracking_id') = ?",
    )
      .bind(trackingId)
      .all<{ type: string }>();
    expect(events.results.map((r) => r.type)).toEqual(['tracking.open']);
  });
});

describe('the mail frame', () => {
  const frame = (address: string, init: RequestInit = {}) =>
    send('https://mail.example.com/mail-view', {
      method: 'POST',
      ...init,
      address,
      headers: { 'Sec-Fetch-Site': 'same-origin', ...(init.headers as Record<string, string>) },
    });

  it('is limited per address', async () => {
    const answers = await flood(130, 65, () => {
      const form = new FormData();
      form.set('html', '<b>x</b>');
      return frame('198.51.100.30', { body: form });
    });
    const refused = answers.filter((a) => a.status === 429);
    expect(answers.filter((a) => a.status === 200).length).toBeLessThanOrEqual(120);
    expect(refused.length).toBeGreaterThanOrEqual(10);
    expectRateLimited(refused[0]!, /mail frames/);
  });

  it('refuses a body over 8 MB by its Content-Length', async () => {
    const big = new Uint8Array(8 * 1024 * 1024 + 1);
    const answer = await frame('198.51.100.31', { body: big, headers: { 'Content-Type': 'text/plain' } });
    expectError(answer, 413, 'payload_too_large');
  });
});
