// Webhook delivery: the signed Event envelope, fan-out to matching endpoints, retries on the
// schedule, timeouts and network errors, pausing and deleting endpoints, payloads over 64 KB, and a
// message kept for the queue when the database fails. The consumer runs with an in-test subscriber
// (its `fetch`), a clock.now the test moves, and a queue that records what would be enqueued, so each
// step is driven and seen by the test.
import { env } from 'cloudflare:workers';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it, vi } from 'vitest';
import type { Env } from '../../worker/env.ts';
import { retryDelayMs } from '../../worker/webhooks/schedule.ts';
import { runSweep } from '../../worker/webhooks/sweep.ts';
import { api } from './helpers.ts';
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
  SECOND,
  subscriber,
  webhookTestSetup,
  writeEvent,
} from './webhook-helpers.ts';

const { clock, options } = webhookTestSetup();

async function hmac(key: Uint8Array, message: string): Promise<Uint8Array> {
  const cryptoKey = await crypto.subtle.importKey('raw', key, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  return new Uint8Array(await crypto.subtle.sign('HMAC', cryptoKey, new TextEncoder().encode(message)));
}

describe('webhook delivery', () => {
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
    expect(Math.abs(Number(t) - clock.now / 1000)).toBeLessThan(2);
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

    clock.now += 5 * SECOND;
    await consume(testEnv, options(sub), [sent.shift()!.body]);
    [conversation] = await conversations(endpoint.id);
    expect(conversation).toMatchObject({ status: 'retrying', attempts: 2, last_status_code: 500 });
    expect(sent).toEqual([{ body: { kind: 'delivery', conversation_id: conversation!.id }, delaySeconds: 300 }]);

    clock.now += 300 * SECOND;
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

    clock.now += 10 * SECOND;
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
      .bind(clock.now, id)
      .run();
    sent.length = 0;
    await consume(testEnv, options(sub), [{ kind: 'delivery', conversation_id: id }]);
    const [waiting] = await conversations(endpoint.id);
    expect(waiting).toMatchObject({ status: 'retrying', attempts: 7, next_attempt_at: clock.now + 14 * 3600 * SECOND });
    expect(sent).toEqual([]);
    // The sweep enqueues it once it is due.
    expect((await runSweep(testEnv, clock.now + 13 * 3600 * SECOND)).retries).toBe(0);
    expect((await runSweep(testEnv, clock.now + 15 * 3600 * SECOND)).retries).toBe(1);
    expect(sent).toEqual([{ body: { kind: 'delivery', conversation_id: id } }]);

    // The 10th failed attempt ends the schedule.
    await env.DB.prepare('UPDATE webhook_conversations SET attempts = 9, next_attempt_at = ? WHERE id = ?')
      .bind(clock.now, id)
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
    clock.now += 3600 * SECOND;
    await consume(testEnv, options(sub), [sent[0]!.body, eventMessage(whilePaused)]);
    expect((await runSweep(testEnv, clock.now)).retries).toBe(0);
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
    clock.now += 60 * SECOND;
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
