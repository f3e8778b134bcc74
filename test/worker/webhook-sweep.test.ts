// The webhook sweep: it re-sends outbox events that never reached the queue and calls whose sender
// died, expires idempotency keys, and runs from the cron handler through the real queue.
import { createScheduledController } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { describe, expect, it, vi } from 'vitest';
import { eventStatement, newEvent } from '../../worker/events/outbox.ts';
import { runSweep } from '../../worker/webhooks/sweep.ts';
import worker from '../../worker/index.ts';
import {
  consume,
  conversations,
  createEndpoint,
  emailData,
  eventMessage,
  recordingEnv,
  SECOND,
  subscriber,
  webhookTestSetup,
  writeEvent,
} from './webhook-helpers.ts';

const { clock, options } = webhookTestSetup();

describe('the sweep', () => {
  it('re-dispatches outbox events that never reached the queue, and expires idempotency keys', async () => {
    await createEndpoint();
    const lost = newEvent('email.new', null, emailData());
    lost.created_at = new Date(clock.now - 5 * 60 * SECOND).toISOString();
    await eventStatement(env.DB, lost).run();
    const fresh = newEvent('email.new', null, emailData()); // may still be on its way to the queue
    await eventStatement(env.DB, fresh).run();
    await env.DB.prepare(
      `INSERT INTO idempotency_keys (key, scope, request_hash, status, created_at, expires_at)
       VALUES ('old', 'POST /emails', 'h', 'completed', 0, ?), ('new', 'POST /emails', 'h', 'completed', 0, ?)`,
    )
      .bind(clock.now - 1, clock.now + 3600 * SECOND)
      .run();
    const { env: testEnv, sent } = recordingEnv();

    expect(await runSweep(testEnv, clock.now)).toEqual({
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
      .bind(clock.now + 75 * SECOND, id)
      .run();
    sent.length = 0;
    expect((await runSweep(testEnv, clock.now + 60 * SECOND)).retries).toBe(0);
    expect((await runSweep(testEnv, clock.now + 140 * SECOND)).retries).toBe(1);
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
