// Webhooks with mail shards (worker/shards/): an event and its calls live in the event's shard, the
// endpoints in the directory. Run with three shards by `npm run test:shards`; with one shard the same
// tests hold for DB alone.
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import type { WebhookQueueMessage } from '../../../worker/env.ts';
import { eventStatement, newEvent } from '../../../worker/events/outbox.ts';
import { shards, type Shard } from '../../../worker/shards/registry.ts';
import { deliveryOptions } from '../../../worker/webhooks/schedule.ts';
import { runSweep } from '../../../worker/webhooks/sweep.ts';
import { api } from '../helpers.ts';
import { readAccount } from '../read-helpers.ts';
import { consume, createEndpoint, emailData, recordingEnv, subscriber } from '../webhook-helpers.ts';

const all = shards(env);
const tag = (shard: Shard) => (shard.name === 'DB' ? {} : { shard: shard.name });

/** An email.new of `accountId` in `shard`'s outbox, handed to the queue (the test plays the queue). */
async function eventIn(shard: Shard, accountId: string) {
  const event = newEvent('email.new', accountId, emailData());
  await shard.db.batch([
    eventStatement(shard.db, event),
    shard.db.prepare('UPDATE events SET enqueued_at = ? WHERE id = ?').bind(event.created_at, event.id),
  ]);
  return event;
}

const conversationsIn = async (shard: Shard, endpointId: string) =>
  (
    await shard.db
      .prepare('SELECT id, event_id, status FROM webhook_conversations WHERE endpoint_id = ?')
      .bind(endpointId)
      .all<{ id: string; event_id: string; status: string }>()
  ).results;

describe('webhooks over every shard', () => {
  it('fans out and calls each event from its shard; lists, re-sends and drops the calls wherever they are', async () => {
    const accounts = await Promise.all(all.map((shard) => readAccount(undefined, { shard: shard.name })));
    const endpoint = await createEndpoint({ account_ids: accounts.map((a) => a.id) });
    const events = await Promise.all(all.map((shard, i) => eventIn(shard, accounts[i]!.id)));
    let clock = Date.now();
    const sub = subscriber(503);
    const options = deliveryOptions({ fetch: sub.fetch, now: () => clock, random: () => 0.5, timeoutMs: 50 });
    const { env: testEnv, sent } = recordingEnv();

    const messages: WebhookQueueMessage[] = events.map((e, i) => ({ kind: 'event', event_id: e.id, ...tag(all[i]!) }));
    const result = await consume(testEnv, options, messages);
    expect(result.explicitAcks.sort()).toEqual(messages.map((_, i) => `msg-${i}`).sort());
    // One call per event, each signed with the event's id, from whichever shard holds it.
    expect(sub.calls.map((c) => c.headers.get('webhook-id')).sort()).toEqual(events.map((e) => e.id).sort());
    for (const [i, shard] of all.entries()) {
      const held = await conversationsIn(shard, endpoint.id);
      expect(held.map((c) => [c.event_id, c.status])).toEqual([[events[i]!.id, 'retrying']]);
    }
    // Each retry names the shard of its call.
    const retries = sent.map((s) => s.body);
    expect(retries).toHaveLength(all.length);
    for (const shard of all) {
      const [held] = await conversationsIn(shard, endpoint.id);
      expect(retries).toContainEqual({ kind: 'delivery', conversation_id: held!.id, ...tag(shard) });
    }

    // The endpoint's log lists the calls of every shard, newest first, and pages by offset.
    const listed = await api('GET', `/webhooks/conversations?endpoint_id=${endpoint.id}`);
    expect(listed.status).toBe(200);
    expect(listed.body.data.map((c: any) => c.event_id).sort()).toEqual(events.map((e) => e.id).sort());
    const order = listed.body.data.map((c: any) => `${c.created_at} ${c.id}`);
    expect(order).toEqual([...order].sort().reverse());
    const second = await api('GET', `/webhooks/conversations?endpoint_id=${endpoint.id}&limit=1&offset=1`);
    expect(second.body.data.map((c: any) => c.id)).toEqual(listed.body.data.slice(1, 2).map((c: any) => c.id));
    expect(second.body.has_more).toBe(all.length > 2);

    // The sweep re-sends the calls due in every shard, and the events that never reached the queue,
    // each message naming its shard.
    const last = all[all.length - 1]!;
    const unsent = newEvent('email.new', accounts[accounts.length - 1]!.id, emailData());
    await eventStatement(last.db, unsent).run();
    sent.length = 0;
    clock += 3_600_000;
    await runSweep(testEnv, clock);
    expect(sent.map((s) => s.body).filter((b) => b.kind === 'event')).toEqual([
      { kind: 'event', event_id: unsent.id, ...tag(last) },
    ]);
    const swept = sent.map((s) => s.body).filter((b) => b.kind === 'delivery');
    expect(swept.map((b) => b.conversation_id).sort()).toEqual(retries.map((b) => (b as any).conversation_id).sort());
    expect(swept.sort((a, b) => a.conversation_id.localeCompare(b.conversation_id))).toEqual(
      [...retries].sort((a, b) => (a as any).conversation_id.localeCompare((b as any).conversation_id)),
    );

    // Pausing drops the waiting calls in every shard; a retry still finds its call in the last one.
    expect((await api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { body: { enabled: false } })).status).toBe(200);
    for (const shard of all)
      expect((await conversationsIn(shard, endpoint.id)).map((c) => c.status)).toEqual(['dropped']);
    const [inLast] = await conversationsIn(last, endpoint.id);
    const retried = await api('POST', `/webhooks/conversations/${inLast!.id}/retry`);
    expect(retried.status).toBe(400);
    expect(JSON.stringify(retried.body)).toContain('paused');
  });

  it('pages an endpoint\u2019s log of calls made at different times on every shard: newest first, each once', async () => {
    const accounts = await Promise.all(all.map((shard) => readAccount(undefined, { shard: shard.name })));
    const endpoint = await createEndpoint({ account_ids: accounts.map((a) => a.id) });
    let clock = Date.now();
    const options = deliveryOptions({ fetch: subscriber(200).fetch, now: () => clock, random: () => 0.5 });
    const { env: testEnv } = recordingEnv();
    // Rounds of events on every shard, the last one taking more than a page's 100 bound values.
    for (let round = 0; round < 4; round++) {
      const messages: WebhookQueueMessage[] = [];
      for (const [i, shard] of all.entries()) {
        const count = i === all.length - 1 ? 30 : 5;
        for (let k = 0; k < count; k++) {
          const event = await eventIn(shard, accounts[i]!.id);
          messages.push({ kind: 'event', event_id: event.id, ...tag(shard) });
        }
      }
      await consume(testEnv, options, messages);
      clock += 1_000;
    }
    const stored = (await Promise.all(all.map((shard) => conversationsIn(shard, endpoint.id)))).flat();
    expect(stored).toHaveLength(4 * (30 + 5 * (all.length - 1)));

    const seen: { id: string; created_at: string }[] = [];
    for (let offset = 0; ; offset += 50) {
      const page = await api('GET', `/webhooks/conversations?endpoint_id=${endpoint.id}&limit=50&offset=${offset}`);
      expect(page.status).toBe(200);
      seen.push(...page.body.data);
      if (!page.body.has_more) break;
    }
    expect(seen.map((c) => c.id).sort()).toEqual(stored.map((c) => c.id).sort());
    const order = seen.map((c) => `${c.created_at} ${c.id}`);
    expect(order).toEqual([...order].sort().reverse());
    const all120 = await api('GET', `/webhooks/conversations?endpoint_id=${endpoint.id}&limit=250`);
    expect(all120.body.data.map((c: any) => c.id)).toEqual(seen.map((c) => c.id));
  });
});
