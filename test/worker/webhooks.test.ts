import { createScheduledController } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { Webhook } from 'standardwebhooks';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Env } from '../../worker/env.ts';
import { eventStatement, newEvent, type OutboxEvent } from '../../worker/events/outbox.ts';
import { newId } from '../../worker/lib/ids.ts';
import { deliveryOptions, type DeliveryOptions, retryDelayMs } from '../../worker/webhooks/schedule.ts';
import { createEndpointBody } from '../../worker/webhooks/endpoints.ts';
import { runSweep } from '../../worker/webhooks/sweep.ts';
import { webhookUrlProblem } from '../../worker/webhooks/url.ts';
import worker from '../../worker/index.ts';
import { api, expectError } from './helpers.ts';
import {
  type Call,
  consume,
  conversations,
  createEndpoint,
  emailData,
  eventMessage,
  HOOK_URL,
  insertAccount,
  recordingEnv,
  subscriber,
  writeEvent,
} from './webhook-helpers.ts';

const SECOND = 1000;

beforeEach(async () => {
  await env.DB.batch(
    ['webhook_conversations', 'webhook_endpoints', 'events', 'idempotency_keys', 'accounts'].map((table) =>
      env.DB.prepare(`DELETE FROM ${table}`),
    ),
  );
});

afterEach(() => {
  vi.restoreAllMocks();
});

describe('webhook endpoints', () => {
  it('creates an endpoint with a Standard Webhooks secret, stored encrypted', async () => {
    const account = await insertAccount();
    const created = await createEndpoint({
      description: 'orders',
      trigger_events: ['email.new', 'account.add', 'email.new'],
      account_ids: [account],
      headers: [{ key: 'Authorization', value: 'Bearer abc' }],
    });
    expect(created).toEqual({
      object: 'WebhookEndpoint',
      id: expect.stringMatching(/^we_[0-9A-HJKMNP-TV-Z]{26}$/),
      url: HOOK_URL,
      description: 'orders',
      trigger_events: ['email.new', 'account.add'],
      account_ids: [account],
      headers: [{ key: 'Authorization', value: 'Bearer abc' }],
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
      enabled: true,
      created_at: expect.any(String),
    });
    expect(atob(created.secret.slice('whsec_'.length))).toHaveLength(32);
    const stored = await env.DB.prepare('SELECT secret FROM webhook_endpoints WHERE id = ?')
      .bind(created.id)
      .first<{ secret: string }>();
    expect(stored!.secret).not.toContain(created.secret.slice(6, 20));

    const fetched = await api('GET', `/webhooks/endpoints/${created.id}`);
    expect(fetched.status).toBe(200);
    expect(fetched.body).toEqual(created);
  });

  it('lists endpoints newest first with offset paging', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await createEndpoint({ description: `e${i}` })).id);
    const first = await api('GET', '/webhooks/endpoints?limit=2');
    expect(first.status).toBe(200);
    expect(first.body.object).toBe('WebhookEndpoints');
    expect(first.body.data.map((e: any) => e.id)).toEqual([ids[2], ids[1]]);
    expect(first.body.has_more).toBe(true);
    expect(first.body.data[0].secret).toMatch(/^whsec_/);
    const rest = await api('GET', '/webhooks/endpoints?limit=2&offset=2');
    expect(rest.body).toMatchObject({ data: [{ id: ids[0] }], has_more: false });
    expectError(await api('GET', '/webhooks/endpoints?limit=0'), 400, 'invalid_parameters');
  });

  it('PATCH changes only the given fields and keeps id and secret', async () => {
    const created = await createEndpoint({ description: 'before', headers: [{ key: 'X-Tenant', value: 't1' }] });
    const patched = await api('PATCH', `/webhooks/endpoints/${created.id}`, {
      body: { trigger_events: ['account.add'], enabled: false },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toEqual({ ...created, trigger_events: ['account.add'], enabled: false });
    const empty = await api('PATCH', `/webhooks/endpoints/${created.id}`, { body: {} });
    expect(empty.body).toEqual(patched.body);

    for (const body of [
      { trigger_events: ['email.nope'] },
      { url: 'ftp://x.example.com' },
      { enabled: 'no' },
      { secret: 'whsec_x' },
    ]) {
      expectError(await api('PATCH', `/webhooks/endpoints/${created.id}`, { body }), 400, 'invalid_parameters');
    }
    expect((await api('GET', `/webhooks/endpoints/${created.id}`)).body).toEqual(patched.body);
  });

  it('DELETE answers {success: true}, after which the endpoint is gone', async () => {
    const created = await createEndpoint();
    const deleted = await api('DELETE', `/webhooks/endpoints/${created.id}`);
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ success: true });
    expectError(await api('GET', `/webhooks/endpoints/${created.id}`), 404, 'not_found');
    expectError(await api('DELETE', `/webhooks/endpoints/${created.id}`), 404, 'not_found');
    expect((await api('GET', '/webhooks/endpoints')).body.data).toEqual([]);
  });

  it.each([
    ['malformed', 'we_nope'],
    ['of the wrong type', newId('account')],
    ['unknown', newId('endpoint')],
  ])('answers 404 for an id that is %s', async (_label, id) => {
    expectError(await api('GET', `/webhooks/endpoints/${id}`), 404, 'not_found');
    expectError(await api('PATCH', `/webhooks/endpoints/${id}`, { body: { enabled: false } }), 404, 'not_found');
    expectError(await api('DELETE', `/webhooks/endpoints/${id}`), 404, 'not_found');
  });

  it.each([
    ['a missing url', { url: undefined }, 'url'],
    ['a relative url', { url: '/hook' }, 'url'],
    ['an ftp url', { url: 'ftp://hooks.example.com/' }, 'url'],
    ['a url with credentials', { url: 'https://user:pw@hooks.example.com/' }, 'url'],
    ['missing trigger_events', { trigger_events: undefined }, 'trigger_events'],
    ['empty trigger_events', { trigger_events: [] }, 'trigger_events'],
    ['an unknown event type', { trigger_events: ['email.new', 'email.exploded'] }, 'email.exploded'],
    ['a header value with CR/LF', { headers: [{ key: 'X-A', value: 'a\r\nX-B: b' }] }, 'headers.0.value'],
    ['a header name with a space', { headers: [{ key: 'X A', value: 'a' }] }, 'headers.0.key'],
    ['a Content-Type header', { headers: [{ key: 'content-type', value: 'text/plain' }] }, 'headers.0.key'],
    ['a webhook-* header', { headers: [{ key: 'Webhook-Signature', value: 'v1,x' }] }, 'headers.0.key'],
    ['the signature header', { headers: [{ key: 'X-Email-Engine-Signature', value: 'x' }] }, 'headers.0.key'],
    [
      'a repeated header',
      {
        headers: [
          { key: 'X-A', value: '1' },
          { key: 'x-a', value: '2' },
        ],
      },
      'headers',
    ],
    ['a non-boolean enabled', { enabled: 'yes' }, 'enabled'],
    ['an unknown field', { colour: 'red' }, 'colour'],
  ])('refuses %s with 400 naming it', async (_label, fields, param) => {
    const body = { url: HOOK_URL, trigger_events: ['email.new'], ...fields };
    const error = expectError(await api('POST', '/webhooks/endpoints', { body }), 400, 'invalid_parameters');
    expect(error.detail).toContain(param);
  });

  it('answers 404 for account_ids naming no account', async () => {
    expectError(
      await api('POST', '/webhooks/endpoints', {
        body: { url: HOOK_URL, trigger_events: ['email.new'], account_ids: [newId('account')] },
      }),
      404,
      'not_found',
    );
    expectError(
      await api('POST', '/webhooks/endpoints', {
        body: { url: HOOK_URL, trigger_events: ['email.new'], account_ids: ['acc_bad'] },
      }),
      404,
      'not_found',
    );
    expect((await api('GET', '/webhooks/endpoints')).body.data).toEqual([]);
  });

  it('refuses private, loopback and link-local URLs unless ALLOW_PRIVATE_WEBHOOK_URLS is true', () => {
    const refused = [
      'http://localhost:3000/hook',
      'http://api.localhost/hook',
      'http://printer.local/hook',
      'http://intranet/hook',
      'http://127.0.0.1/hook',
      'http://2130706433/hook', // 127.0.0.1 written as a number
      'http://10.1.2.3/hook',
      'http://172.16.0.1/hook',
      'http://192.168.1.1/hook',
      'http://169.254.169.254/latest/meta-data',
      'http://100.64.0.1/hook',
      'http://0.0.0.0/hook',
      'http://[::1]/hook',
      'http://[::]/hook',
      'http://[fe80::1]/hook',
      'http://[fd12:3456::1]/hook',
      'http://[::ffff:127.0.0.1]/hook',
      'http://[::ffff:10.0.0.1]/hook',
    ];
    for (const url of refused) {
      expect(webhookUrlProblem(url, false), url).toMatch(/public host/);
      expect(webhookUrlProblem(url, true), url).toBeNull();
      const parsed = createEndpointBody(false).safeParse({ url, trigger_events: ['email.new'] });
      expect(parsed.success, url).toBe(false);
    }
    for (const url of [
      'https://hooks.example.com/x',
      'http://8.8.8.8/hook',
      'http://172.32.0.1/',
      'http://[2606:4700::1111]/hook',
    ]) {
      expect(webhookUrlProblem(url, false), url).toBeNull();
    }
    expect(createEndpointBody(false).safeParse({ url: HOOK_URL, trigger_events: ['email.new'] }).success).toBe(true);
  });
});

// ---------------------------------------------------------------------------------------------
// Delivery. The consumer runs with an in-test subscriber (its `fetch`), a clock the test moves,
// and a queue that records what would be enqueued, so each step is driven and seen by the test.

let clock = Date.now();

function options(sub: ReturnType<typeof subscriber>, overrides: Partial<DeliveryOptions> = {}): DeliveryOptions {
  return deliveryOptions({ fetch: sub.fetch, now: () => clock, random: () => 0.5, timeoutMs: 50, ...overrides });
}

async function hmac(key: Uint8Array, message: string): Promise<Uint8Array> {
  const cryptoKey = await crypto.subtle.importKey('raw', key, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  return new Uint8Array(await crypto.subtle.sign('HMAC', cryptoKey, new TextEncoder().encode(message)));
}

describe('webhook delivery', () => {
  beforeEach(() => {
    clock = Date.now();
  });

  it('POSTs the Event envelope with both signatures and the endpoint headers, then acks', async () => {
    const account = await insertAccount();
    const endpoint = await createEndpoint({ headers: [{ key: 'Authorization', value: 'Bearer t0ken' }] });
    const event = await writeEvent('email.new', account, emailData());
    const sub = subscriber(200);
    const { env: testEnv, sent } = recordingEnv();

    const result = await consume(testEnv, options(sub), [eventMessage(event)]);
    expect(result.explicitAcks).toEqual(['msg-0']);
    expect(result.retryMessages).toEqual([]);
    expect(sent).toEqual([]);

    expect(sub.calls).toHaveLength(1);
    const [call] = sub.calls as [Call];
    expect(call.url).toBe(HOOK_URL);
    expect(call.json).toEqual({
      object: 'Event',
      id: event.id,
      type: 'email.new',
      created_at: event.created_at,
      account_id: account,
      endpoint_id: endpoint.id,
      data: event.data,
    });
    expect(call.headers.get('Content-Type')).toBe('application/json');
    expect(call.headers.get('Authorization')).toBe('Bearer t0ken');
    expect(call.headers.get('webhook-id')).toBe(event.id);

    // X-Email-Engine-Signature: t=<unix s>,v1=<hex HMAC-SHA256(secret as UTF-8, "<t>.<body>")>
    const t = call.headers.get('webhook-timestamp')!;
    expect(Math.abs(Number(t) - clock / 1000)).toBeLessThan(2);
    const engine = await hmac(new TextEncoder().encode(endpoint.secret), `${t}.${call.body}`);
    const hex = [...engine].map((b) => b.toString(16).padStart(2, '0')).join('');
    expect(call.headers.get('X-Email-Engine-Signature')).toBe(`t=${t},v1=${hex}`);

    // Standard Webhooks: keyed with the base64-decoded part after whsec_, over "<id>.<t>.<body>".
    const key = Uint8Array.from(atob(endpoint.secret.slice('whsec_'.length)), (ch) => ch.charCodeAt(0));
    const standard = await hmac(key, `${event.id}.${t}.${call.body}`);
    expect(call.headers.get('webhook-signature')).toBe(`v1,${btoa(String.fromCharCode(...standard))}`);
    // …and the reference library verifies it unchanged.
    expect(new Webhook(endpoint.secret).verify(call.body, Object.fromEntries(call.headers))).toEqual(call.json);

    const [conversation] = await conversations();
    expect(conversation).toMatchObject({
      status: 'delivered',
      attempts: 1,
      last_status_code: 200,
      last_error: null,
      next_attempt_at: null,
    });
  });

  it('fans out only to enabled endpoints whose trigger_events and account_ids match, once', async () => {
    const [acc1, acc2] = [await insertAccount(), await insertAccount()];
    const all = await createEndpoint({ url: `${HOOK_URL}?all` });
    const mine = await createEndpoint({ url: `${HOOK_URL}?mine`, account_ids: [acc1] });
    await createEndpoint({ url: `${HOOK_URL}?other-account`, account_ids: [acc2] });
    await createEndpoint({ url: `${HOOK_URL}?other-type`, trigger_events: ['account.add'] });
    await createEndpoint({ url: `${HOOK_URL}?paused`, enabled: false });
    const event = await writeEvent('email.new', acc1, emailData());
    const sub = subscriber(200);
    const { env: testEnv } = recordingEnv();

    await consume(testEnv, options(sub), [eventMessage(event)]);
    expect(sub.calls.map((c) => c.url).sort()).toEqual([`${HOOK_URL}?all`, `${HOOK_URL}?mine`]);
    expect((await conversations()).map((c) => c.endpoint_id).sort()).toEqual([all.id, mine.id].sort());

    // The queue delivers the same message again: nothing new is created or sent.
    const again = await consume(testEnv, options(sub), [eventMessage(event)]);
    expect(again.explicitAcks).toEqual(['msg-0']);
    expect(sub.calls).toHaveLength(2);
    expect(await conversations()).toHaveLength(2);
  });

  it('retries 500, 500 on the schedule and is delivered on the third attempt', async () => {
    const endpoint = await createEndpoint();
    const event = await writeEvent('email.new', null, emailData());
    const sub = subscriber(500, 500, 200);
    const { env: testEnv, sent } = recordingEnv();

    await consume(testEnv, options(sub), [eventMessage(event)]);
    let [conversation] = await conversations(endpoint.id);
    expect(conversation).toMatchObject({
      status: 'retrying',
      attempts: 1,
      last_status_code: 500,
      last_error: 'HTTP 500',
    });
    expect(sent).toEqual([{ body: { kind: 'delivery', conversation_id: conversation!.id }, delaySeconds: 5 }]);

    // Arriving before it is due, the retry is not sent.
    await consume(testEnv, options(sub), [sent[0]!.body]);
    expect(sub.calls).toHaveLength(1);

    clock += 5 * SECOND;
    await consume(testEnv, options(sub), [sent.shift()!.body]);
    [conversation] = await conversations(endpoint.id);
    expect(conversation).toMatchObject({ status: 'retrying', attempts: 2, last_status_code: 500 });
    expect(sent).toEqual([{ body: { kind: 'delivery', conversation_id: conversation!.id }, delaySeconds: 300 }]);

    clock += 300 * SECOND;
    await consume(testEnv, options(sub), [sent.shift()!.body]);
    [conversation] = await conversations(endpoint.id);
    expect(conversation).toMatchObject({
      status: 'delivered',
      attempts: 3,
      last_status_code: 200,
      last_error: null,
      next_attempt_at: null,
    });
    expect(sent).toEqual([]);
    expect(sub.calls).toHaveLength(3);
    expect(new Set(sub.calls.map((c) => c.body)).size).toBe(1); // the same bytes every time
    expect(new Set(sub.calls.map((c) => c.headers.get('webhook-id'))).size).toBe(1);
  });

  it('records a subscriber that never answers as a timeout, and a refused connection as a network error', async () => {
    await createEndpoint();
    const event = await writeEvent('email.new', null, emailData());
    const { env: testEnv } = recordingEnv();
    await consume(testEnv, options(subscriber('hang'), { timeoutMs: 30 }), [eventMessage(event)]);
    let [conversation] = await conversations();
    expect(conversation).toMatchObject({ status: 'retrying', attempts: 1, last_status_code: null });
    expect(conversation!.last_error).toMatch(/timeout after 0\.03 s/);

    clock += 10 * SECOND;
    await consume(testEnv, options(subscriber('network-error')), [
      { kind: 'delivery', conversation_id: conversation!.id },
    ]);
    [conversation] = await conversations();
    expect(conversation).toMatchObject({ status: 'retrying', attempts: 2, last_status_code: null });
    expect(conversation!.last_error).toMatch(/network error: connection refused/);
  });

  it('follows the schedule 5 s … 24 h with ±10 % jitter, leaves waits over 12 h to the sweep, then fails', async () => {
    const base = [5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400].map((s) => s * SECOND);
    base.forEach((ms, i) => {
      expect(retryDelayMs(i + 1, () => 0.5)).toBe(ms);
      expect(retryDelayMs(i + 1, () => 0)).toBe(Math.round(ms * 0.9));
      expect(retryDelayMs(i + 1, () => 0.999999)).toBeCloseTo(ms * 1.1, -2);
    });
    expect(retryDelayMs(10, () => 0.5)).toBeNull();

    const endpoint = await createEndpoint();
    const event = await writeEvent('email.new', null, emailData());
    const sub = subscriber(500, 500, 200);
    const { env: testEnv, sent } = recordingEnv();
    await consume(testEnv, options(sub), [eventMessage(event)]);
    const [{ id }] = (await conversations(endpoint.id)) as [{ id: string }];

    // After the 7th failure the wait is 14 h: too long for a queue delay, so nothing is enqueued.
    await env.DB.prepare('UPDATE webhook_conversations SET attempts = 6, next_attempt_at = ? WHERE id = ?')
      .bind(clock, id)
      .run();
    sent.length = 0;
    await consume(testEnv, options(sub), [{ kind: 'delivery', conversation_id: id }]);
    const [waiting] = await conversations(endpoint.id);
    expect(waiting).toMatchObject({ status: 'retrying', attempts: 7, next_attempt_at: clock + 14 * 3600 * SECOND });
    expect(sent).toEqual([]);
    // The sweep enqueues it once it is due.
    expect((await runSweep(testEnv, clock + 13 * 3600 * SECOND)).retries).toBe(0);
    expect((await runSweep(testEnv, clock + 15 * 3600 * SECOND)).retries).toBe(1);
    expect(sent).toEqual([{ body: { kind: 'delivery', conversation_id: id } }]);

    // The 10th failed attempt ends the schedule.
    await env.DB.prepare('UPDATE webhook_conversations SET attempts = 9, next_attempt_at = ? WHERE id = ?')
      .bind(clock, id)
      .run();
    sent.length = 0;
    await consume(testEnv, options(subscriber(503)), [{ kind: 'delivery', conversation_id: id }]);
    expect((await conversations(endpoint.id))[0]).toMatchObject({
      status: 'failed',
      attempts: 10,
      last_status_code: 503,
      next_attempt_at: null,
    });
    expect(sent).toEqual([]);
  });

  it('pausing drops waiting calls for good; re-enabling delivers only new events', async () => {
    const endpoint = await createEndpoint();
    const sub = subscriber(500, 200);
    const { env: testEnv, sent } = recordingEnv();
    const first = await writeEvent('email.new', null, emailData());
    await consume(testEnv, options(sub), [eventMessage(first)]);
    expect((await conversations())[0]).toMatchObject({ status: 'retrying' });

    await api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { body: { enabled: false } });
    expect((await conversations())[0]).toMatchObject({ status: 'dropped', next_attempt_at: null, attempts: 1 });

    const whilePaused = await writeEvent('email.new', null, emailData());
    clock += 3600 * SECOND;
    await consume(testEnv, options(sub), [sent[0]!.body, eventMessage(whilePaused)]);
    expect((await runSweep(testEnv, clock)).retries).toBe(0);
    expect(sub.calls).toHaveLength(1);
    expect(await conversations()).toHaveLength(1);

    await api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { body: { enabled: true } });
    const afterResume = await writeEvent('email.new', null, emailData());
    await consume(testEnv, options(sub), [sent[0]!.body, eventMessage(afterResume)]);
    expect(sub.calls.map((c) => c.json.id)).toEqual([first.id, afterResume.id]);
    const rows = await conversations();
    expect(rows.map((r) => [r.event_id, r.status])).toEqual([
      [first.id, 'dropped'],
      [afterResume.id, 'delivered'],
    ]);
  });

  it('deleting an endpoint drops its waiting calls', async () => {
    const endpoint = await createEndpoint();
    const { env: testEnv, sent } = recordingEnv();
    const sub = subscriber(500, 200);
    await consume(testEnv, options(sub), [eventMessage(await writeEvent('email.new', null, emailData()))]);
    await api('DELETE', `/webhooks/endpoints/${endpoint.id}`);
    clock += 60 * SECOND;
    await consume(testEnv, options(sub), [sent[0]!.body]);
    expect(sub.calls).toHaveLength(1);
    expect((await conversations())[0]).toMatchObject({ status: 'dropped' });
  });

  it('drops `body` and `body_plain` and sets body_truncated when the payload exceeds 64 KB', async () => {
    await createEndpoint();
    const sub = subscriber(200);
    const { env: testEnv } = recordingEnv();
    const big = await writeEvent('email.new', null, emailData('<p>' + 'x'.repeat(70 * 1024) + '</p>'));
    const small = await writeEvent('email.new', null, emailData());
    await consume(testEnv, options(sub), [eventMessage(big), eventMessage(small)]);
    const byId = new Map(sub.calls.map((c) => [c.json.id, c]));
    const bigCall = byId.get(big.id)!;
    expect(bigCall.body.length).toBeLessThan(64 * 1024);
    expect(bigCall.json.data).toEqual({
      object: 'Email',
      id: (big.data as any).id,
      subject: 'Hello',
      body_truncated: true,
    });
    expect(byId.get(small.id)!.json.data).toEqual(small.data);
  });

  it('a message that fails for want of the database is retried by the queue, not lost', async () => {
    await createEndpoint();
    const event = await writeEvent('email.new', null, emailData());
    const { env: testEnv } = recordingEnv();
    const broken = {
      ...testEnv,
      DB: {
        prepare: () => {
          throw new Error('D1 is down');
        },
      },
    } as unknown as Env;
    vi.spyOn(console, 'error').mockImplementation(() => {});
    const result = await consume(broken, options(subscriber(200)), [eventMessage(event)]);
    expect(result.explicitAcks).toEqual([]);
    expect(result.retryMessages.map((m) => m.msgId)).toEqual(['msg-0']);
  });
});

describe('the sweep', () => {
  beforeEach(() => {
    clock = Date.now();
  });

  it('re-dispatches outbox events that never reached the queue, and expires idempotency keys', async () => {
    await createEndpoint();
    const lost = newEvent('email.new', null, emailData());
    lost.created_at = new Date(clock - 5 * 60 * SECOND).toISOString();
    await eventStatement(env.DB, lost).run();
    const fresh = newEvent('email.new', null, emailData()); // may still be on its way to the queue
    await eventStatement(env.DB, fresh).run();
    await env.DB.prepare(
      `INSERT INTO idempotency_keys (key, scope, request_hash, status, created_at, expires_at)
       VALUES ('old', 'POST /emails', 'h', 'completed', 0, ?), ('new', 'POST /emails', 'h', 'completed', 0, ?)`,
    )
      .bind(clock - 1, clock + 3600 * SECOND)
      .run();
    const { env: testEnv, sent } = recordingEnv();

    expect(await runSweep(testEnv, clock)).toEqual({
      events: 1,
      retries: 0,
      idempotency_keys: 1,
      expired: 0,
      events_pruned: 0,
    });
    expect(sent).toEqual([{ body: { kind: 'event', event_id: lost.id } }]);
    const rows = await env.DB.prepare('SELECT id, enqueued_at FROM events').all<{
      id: string;
      enqueued_at: string | null;
    }>();
    expect(Object.fromEntries(rows.results.map((r) => [r.id, r.enqueued_at !== null]))).toEqual({
      [lost.id]: true,
      [fresh.id]: false,
    });
    const keys = await env.DB.prepare('SELECT key FROM idempotency_keys').all<{ key: string }>();
    expect(keys.results.map((k) => k.key)).toEqual(['new']);

    const sub = subscriber(200);
    await consume(
      testEnv,
      options(sub),
      sent.map((s) => s.body),
    );
    expect(sub.calls.map((c) => c.json.id)).toEqual([lost.id]);
  });

  it('hands a call whose sender died out again once its lease runs out', async () => {
    await createEndpoint();
    const { env: testEnv, sent } = recordingEnv();
    await consume(testEnv, options(subscriber(500)), [eventMessage(await writeEvent('email.new', null, emailData()))]);
    const [{ id }] = (await conversations()) as [{ id: string }];
    // A claim that was never finished: the lease holds it for a while, then the sweep re-sends it.
    await env.DB.prepare('UPDATE webhook_conversations SET next_attempt_at = ? WHERE id = ?')
      .bind(clock + 75 * SECOND, id)
      .run();
    sent.length = 0;
    expect((await runSweep(testEnv, clock + 60 * SECOND)).retries).toBe(0);
    expect((await runSweep(testEnv, clock + 140 * SECOND)).retries).toBe(1);
    expect(sent).toEqual([{ body: { kind: 'delivery', conversation_id: id } }]);
  });

  it('end to end: the cron handler re-sends a lost event through the real queue to the subscriber', async () => {
    await createEndpoint({ trigger_events: ['account.add'] });
    const lost = newEvent('account.add', null, { object: 'Account' });
    lost.created_at = new Date(Date.now() - 60 * SECOND).toISOString();
    await eventStatement(env.DB, lost).run();
    const received: string[] = [];
    vi.spyOn(globalThis, 'fetch').mockImplementation(async (_input, init) => {
      received.push(String(init?.body));
      return new Response(null, { status: 204 });
    });

    await worker.scheduled(createScheduledController(), env);
    await vi.waitFor(
      async () => expect((await conversations())[0]).toMatchObject({ status: 'delivered', last_status_code: 204 }),
      { timeout: 10_000, interval: 50 },
    );
    expect(received.map((b) => JSON.parse(b).id)).toEqual([lost.id]);
  });
});

describe('webhook conversations API', () => {
  beforeEach(() => {
    clock = Date.now();
  });

  it('requires a known endpoint_id', async () => {
    expect(expectError(await api('GET', '/webhooks/conversations'), 400, 'invalid_parameters').detail).toContain(
      'endpoint_id',
    );
    expectError(await api('GET', '/webhooks/conversations?endpoint_id=we_bad'), 404, 'not_found');
    expectError(await api('GET', `/webhooks/conversations?endpoint_id=${newId('endpoint')}`), 404, 'not_found');
  });

  it('lists one endpoint’s calls newest first, filtered by event, with the payload as sent', async () => {
    const endpoint = await createEndpoint();
    const other = await createEndpoint();
    const sub = subscriber(200);
    const { env: testEnv } = recordingEnv();
    const events: OutboxEvent[] = [];
    for (let i = 0; i < 3; i++) {
      events.push(await writeEvent('email.new', null, emailData()));
      clock += SECOND;
      await consume(testEnv, options(sub), [eventMessage(events[i]!)]);
    }

    const page = await api('GET', `/webhooks/conversations?endpoint_id=${endpoint.id}&limit=2`);
    expect(page.status).toBe(200);
    expect(page.body.object).toBe('WebhookConversations');
    expect(page.body.has_more).toBe(true);
    expect(page.body.data.map((c: any) => c.event_id)).toEqual([events[2]!.id, events[1]!.id]);
    const sentToEndpoint = sub.calls.find((c) => c.json.id === events[2]!.id && c.json.endpoint_id === endpoint.id)!;
    expect(page.body.data[0]).toEqual({
      object: 'WebhookConversation',
      id: expect.stringMatching(/^wc_[0-9A-HJKMNP-TV-Z]{26}$/),
      endpoint_id: endpoint.id,
      event_id: events[2]!.id,
      event: 'email.new',
      status: 'delivered',
      attempts: 1,
      last_status_code: 200,
      last_error: null,
      payload: sentToEndpoint.json,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    const rest = await api('GET', `/webhooks/conversations?endpoint_id=${endpoint.id}&limit=2&offset=2`);
    expect(rest.body.data.map((c: any) => c.event_id)).toEqual([events[0]!.id]);
    expect(rest.body.has_more).toBe(false);

    const filtered = await api('GET', `/webhooks/conversations?endpoint_id=${other.id}&event_id=${events[1]!.id}`);
    expect(filtered.body.data).toHaveLength(1);
    expect(filtered.body.data[0]).toMatchObject({ endpoint_id: other.id, event_id: events[1]!.id });
    for (const eventId of ['evt_bad', newId('event')]) {
      const none = await api('GET', `/webhooks/conversations?endpoint_id=${endpoint.id}&event_id=${eventId}`);
      expect(none.body).toEqual({ object: 'WebhookConversations', data: [], has_more: false });
    }

    await api('DELETE', `/webhooks/endpoints/${endpoint.id}`);
    expectError(await api('GET', `/webhooks/conversations?endpoint_id=${endpoint.id}`), 404, 'not_found');
  });

  it('retry sends now and counts as an attempt; a failure leaves the schedule running', async () => {
    const endpoint = await createEndpoint();
    const { env: testEnv } = recordingEnv();
    await consume(testEnv, options(subscriber(500)), [eventMessage(await writeEvent('email.new', null, emailData()))]);
    const [before] = (await conversations()) as [Record<string, any>];

    const answers = [502, 200];
    const received: string[] = [];
    vi.spyOn(globalThis, 'fetch').mockImplementation(async (_input, init) => {
      received.push(String(init?.body));
      return new Response(null, { status: answers.shift()! });
    });

    const failed = await api('POST', `/webhooks/conversations/${before.id}/retry`);
    expect(failed.status).toBe(200);
    expect(failed.body).toMatchObject({
      object: 'WebhookConversation',
      id: before.id,
      status: 'retrying',
      attempts: 2,
      last_status_code: 502,
      last_error: 'HTTP 502',
    });
    expect((await conversations())[0]!.next_attempt_at).toBe(before.next_attempt_at);

    const delivered = await api('POST', `/webhooks/conversations/${before.id}/retry`);
    expect(delivered.body).toMatchObject({ status: 'delivered', attempts: 3, last_status_code: 200, last_error: null });
    expect((await conversations())[0]!.next_attempt_at).toBeNull();
    expect(received).toHaveLength(2);
    expect(JSON.parse(received[0]!)).toEqual(delivered.body.payload);

    expectError(await api('POST', '/webhooks/conversations/wc_bad/retry'), 404, 'not_found');
    expectError(await api('POST', `/webhooks/conversations/${newId('conversation')}/retry`), 404, 'not_found');
    await api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { body: { enabled: false } });
    expectError(await api('POST', `/webhooks/conversations/${before.id}/retry`), 400, 'invalid_parameters');
    expect(received).toHaveLength(2);
  });
});
