/**
 * At-least-once from the outbox to the subscriber, whatever fails in between, and the consumer's
 * limit on calls in flight. The test plays the queue: it hands the consumer the same batch as often
 * as the queue would (1 + max_retries), then drops it, as the queue does without a dead-letter queue.
 */
import { env } from 'cloudflare:workers';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Env, WebhookQueueMessage } from '../../worker/env.ts';
import { MAX_CALLS_PER_INVOCATION } from '../../worker/webhooks/consumer.ts';
import { UNRECORDED_ATTEMPT } from '../../worker/webhooks/delivery.ts';
import { deliveryOptions, MAX_CALLS_IN_FLIGHT } from '../../worker/webhooks/schedule.ts';
import { runSweep } from '../../worker/webhooks/sweep.ts';
import {
  consume,
  conversations,
  createEndpoint,
  emailData,
  eventMessage,
  recordingEnv,
  subscriber,
  writeEvent,
} from './webhook-helpers.ts';

/** wrangler.toml: max_retries = 5, so the queue hands a message over six times in all. */
const QUEUE_DELIVERIES = 6;
const MINUTE = 60_000;

beforeEach(async () => {
  await env.DB.batch(
    ['webhook_conversations', 'webhook_endpoints', 'events'].map((table) => env.DB.prepare(`DELETE FROM ${table}`)),
  );
  vi.spyOn(console, 'error').mockImplementation(() => {});
  vi.spyOn(console, 'warn').mockImplementation(() => {});
});

afterEach(() => {
  vi.restoreAllMocks();
});

/** The real database behind a switch: while `down`, every query fails as D1 does when it is unreachable. */
function switchableDb(db: D1Database) {
  const state = { down: false };
  const check = () => {
    if (state.down) throw new Error('D1_ERROR: Network connection lost.');
  };
  const real = new WeakMap<object, D1PreparedStatement>();
  const wrap = (statement: D1PreparedStatement): D1PreparedStatement => {
    const guarded =
      <A extends unknown[], R>(run: (...args: A) => Promise<R>) =>
      async (...args: A) => {
        check();
        return run(...args);
      };
    const wrapped = {
      bind: (...values: unknown[]) => wrap(statement.bind(...values)),
      first: guarded((column?: string) => (column ? statement.first(column) : statement.first())),
      all: guarded(() => statement.all()),
      run: guarded(() => statement.run()),
      raw: guarded(() => statement.raw()),
    } as unknown as D1PreparedStatement;
    real.set(wrapped, statement);
    return wrapped;
  };
  const wrappedDb = {
    prepare: (sql: string) => wrap(db.prepare(sql)),
    batch: async (statements: D1PreparedStatement[]) => {
      check();
      return db.batch(statements.map((s) => real.get(s) ?? s));
    },
  } as unknown as D1Database;
  return { db: wrappedDb, state };
}

describe('at-least-once delivery', () => {
  it('delivers every event after D1 failed for longer than the queue retries, and logs every attempt', async () => {
    let clock = Date.now();
    await createEndpoint();
    const { env: queueEnv, sent } = recordingEnv();
    const { db, state } = switchableDb(env.DB);
    const testEnv: Env = { ...queueEnv, DB: db };

    // The subscriber answers 200; when `outageOnCall` is set, D1 goes down while the call is on the wire.
    let outageOnCall = false;
    const sub = subscriber(200);
    const fetch: typeof sub.fetch = (url, init) => {
      if (outageOnCall) state.down = true;
      return sub.fetch(url, init);
    };
    const opts = deliveryOptions({ fetch, now: () => clock, random: () => 0.5, timeoutMs: 50 });

    // 1. Three events reach the queue while D1 is down: the consumer fails on every delivery of the batch.
    const lost = [];
    for (let i = 0; i < 3; i++) lost.push(await writeEvent('email.new', null, emailData()));
    state.down = true;
    for (let attempt = 1; attempt <= QUEUE_DELIVERIES; attempt++) {
      const result = await consume(testEnv, opts, lost.map(eventMessage), attempt);
      expect(result.explicitAcks).toEqual([]);
      expect(result.retryMessages).toHaveLength(3);
      clock += 2 ** attempt * 1000;
    }
    // …and the queue drops them. Nothing has reached the subscriber.
    expect(sub.calls).toEqual([]);

    // 2. A fourth event: its call goes out, then D1 fails before the outcome is written, and stays down.
    state.down = false;
    const interrupted = await writeEvent('email.new', null, emailData());
    outageOnCall = true;
    const messages: WebhookQueueMessage[] = [eventMessage(interrupted)];
    for (let attempt = 1; attempt <= QUEUE_DELIVERIES; attempt++) {
      const result = await consume(testEnv, opts, messages, attempt);
      expect(result.explicitAcks).toEqual([]);
      clock += 2 ** attempt * 1000;
    }
    outageOnCall = false;
    expect(sub.calls.map((c) => c.json.id)).toEqual([interrupted.id]);

    // 3. D1 is back. The attempt made during the outage is in the log, counted, and waiting.
    state.down = false;
    const [pendingRow] = await conversations();
    expect(pendingRow).toMatchObject({
      event_id: interrupted.id,
      status: 'pending',
      attempts: 1,
      last_error: UNRECORDED_ATTEMPT,
    });

    // 4. The minute sweep, once the queue has given up: every event whose fan-out never committed,
    //    and the call whose lease ran out, go back on the queue; the consumer delivers them all.
    clock += 4 * MINUTE;
    sent.length = 0;
    expect(await runSweep(testEnv, clock)).toMatchObject({ events: 3, retries: 1 });
    const result = await consume(
      testEnv,
      opts,
      sent.map((s) => s.body),
    );
    expect(result.retryMessages).toEqual([]);

    const received = sub.calls.map((c) => c.json.id as string);
    expect(new Set(received)).toEqual(new Set([...lost, interrupted].map((e) => e.id)));
    const rows = await conversations();
    expect(rows).toHaveLength(4);
    for (const row of rows) {
      // Every call the subscriber got is an attempt in the log, and the last one is recorded.
      expect(row).toMatchObject({ status: 'delivered', last_status_code: 200, last_error: null });
      expect(row.attempts).toBe(received.filter((id) => id === row.event_id).length);
    }
    expect(rows.find((r) => r.event_id === interrupted.id)!.attempts).toBe(2);

    // Nothing is left for later sweeps.
    sent.length = 0;
    expect(await runSweep(testEnv, clock + 10 * MINUTE)).toMatchObject({ events: 0, retries: 0 });
    expect(sent).toEqual([]);
  });

  it(`keeps at most ${MAX_CALLS_IN_FLIGHT} calls in flight per invocation, and makes them all`, async () => {
    const endpoints = [];
    for (let i = 0; i < 4; i++) endpoints.push(await createEndpoint());
    const events = [];
    for (let i = 0; i < 10; i++) events.push(await writeEvent('email.new', null, emailData()));
    let inFlight = 0;
    let most = 0;
    const sub = subscriber(200);
    const fetch: typeof sub.fetch = async (url, init) => {
      inFlight++;
      most = Math.max(most, inFlight);
      try {
        await new Promise((r) => setTimeout(r, 2));
        return await sub.fetch(url, init);
      } finally {
        inFlight--;
      }
    };
    const { env: testEnv } = recordingEnv();
    const result = await consume(testEnv, deliveryOptions({ fetch, timeoutMs: 5_000 }), events.map(eventMessage));
    expect(result.explicitAcks).toHaveLength(10);
    expect(sub.calls).toHaveLength(40);
    expect(most).toBe(MAX_CALLS_IN_FLIGHT);
    const rows = await conversations();
    expect(rows.filter((r) => r.status === 'delivered' && r.attempts === 1)).toHaveLength(40);
  });

  it(`makes at most ${MAX_CALLS_PER_INVOCATION} calls per invocation and puts the rest back on the queue`, {
    timeout: 60_000,
  }, async () => {
    for (let i = 0; i < 10; i++) await createEndpoint();
    const events = [];
    const count = MAX_CALLS_PER_INVOCATION / 10 + 2;
    for (let i = 0; i < count; i++) events.push(await writeEvent('email.new', null, emailData()));
    const sub = subscriber(200);
    const { env: testEnv, sent } = recordingEnv();
    const opts = deliveryOptions({ fetch: sub.fetch, timeoutMs: 5_000 });
    const result = await consume(testEnv, opts, events.map(eventMessage));
    expect(result.explicitAcks).toHaveLength(count);
    expect(sub.calls).toHaveLength(MAX_CALLS_PER_INVOCATION);
    expect(sent).toHaveLength(20);
    expect(sent.every((s) => s.body.kind === 'delivery')).toBe(true);
    await consume(
      testEnv,
      opts,
      sent.map((s) => s.body),
    );
    expect(sub.calls).toHaveLength(count * 10);
    expect((await conversations()).every((r) => r.status === 'delivered' && r.attempts === 1)).toBe(true);
  });
});
