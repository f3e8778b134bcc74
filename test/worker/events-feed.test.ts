// GET /events: what the service emitted, oldest first in commit order, with the webhooks' envelopes.
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { eventStatement, newEvent } from '../../worker/events/outbox.ts';
import { deliveryOptions } from '../../worker/webhooks/schedule.ts';
import { runSweep } from '../../worker/webhooks/sweep.ts';
import { api, expectError } from './helpers.ts';
import {
  consume,
  conversations,
  createEndpoint,
  emailData,
  eventMessage,
  insertAccount,
  recordingEnv,
  subscriber,
  writeEvent,
} from './webhook-helpers.ts';

async function feed(query: string) {
  const res = await api('GET', `/events?${query}`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body as { object: string; data: any[]; has_more: boolean; cursor: string | null };
}

describe('GET /events', () => {
  it('lists events after an id, in commit order, with the filters, paged by cursor', async () => {
    const a = await insertAccount();
    const b = await insertAccount();
    const first = await writeEvent('account.add', a, { id: a });
    // Ids are random within a millisecond; the feed's order is the order of the commits.
    const made = [];
    for (let i = 0; i < 12; i++) {
      const type = i % 3 === 0 ? 'email.update' : 'email.new';
      made.push(await writeEvent(type, i % 2 ? b : a, emailData(`<p>${i}</p>`)));
    }
    const all = await feed(`after=${first.id}&limit=250`);
    expect(all.object).toBe('Events');
    expect(all.data.map((e) => e.id)).toEqual(made.map((e) => e.id));
    expect(all.data[0]).toEqual({
      object: 'Event',
      id: made[0]!.id,
      type: 'email.update',
      created_at: made[0]!.created_at,
      account_id: a,
      endpoint_id: null,
      data: made[0]!.data,
    });

    const onlyB = await feed(`after=${first.id}&account_id=${b}`);
    expect(onlyB.data.map((e) => e.id)).toEqual(made.filter((e) => e.account_id === b).map((e) => e.id));
    const updates = made.filter((e) => e.type === 'email.update').map((e) => e.id);
    expect((await feed(`after=${first.id}&type=email.update`)).data.map((e) => e.id)).toEqual(updates);
    // Several types: repeated or comma-separated, any case.
    const both = made.map((e) => e.id);
    expect((await feed(`after=${first.id}&type=email.update&type=EMAIL.NEW`)).data.map((e) => e.id)).toEqual(both);
    expect((await feed(`after=${first.id}&type=email.update,email.new`)).data.map((e) => e.id)).toEqual(both);
    expect((await feed(`after=${first.id}&account_id=acc_nope`)).data).toEqual([]);

    // Pages of 5: the cursor is bound to the filters it was issued for.
    const paged: string[] = [];
    let page = await feed(`after=${first.id}&limit=5`);
    for (;;) {
      paged.push(...page.data.map((e) => e.id));
      if (!page.cursor) break;
      expect(page.has_more).toBe(true);
      page = await feed(`after=${first.id}&limit=5&cursor=${page.cursor}`);
    }
    expect(paged).toEqual(made.map((e) => e.id));
    const issued = (await feed(`after=${first.id}&limit=5`)).cursor!;
    expectError(await api('GET', `/events?limit=5&cursor=${issued}`), 400, 'invalid_parameters');

    const one = await api('GET', `/events/${made[3]!.id}`);
    expect(one.body).toEqual(all.data[3]);
  });

  it('refuses an after it cannot place, unknown types and ids; 404 for an unknown event', async () => {
    expectError(await api('GET', '/events?after=evt_01M872K1Y72GZK9FR0KXJQ0V6F'), 400, 'invalid_parameters');
    expectError(await api('GET', '/events?after=nope'), 400, 'invalid_parameters');
    const bad = expectError(await api('GET', '/events?type=email.sent'), 400, 'invalid_parameters');
    expect(bad.detail).toContain('email.sent');
    expectError(await api('GET', '/events/evt_01M872K1Y72GZK9FR0KXJQ0V6F'), 404, 'not_found');
    expectError(await api('GET', '/events/we_01M872K1Y72GZK9FR0KXJQ0V6F'), 404, 'not_found');
  });

  it('carries the same envelope as the webhook call, endpoint_id aside', async () => {
    const account = await insertAccount();
    const endpoint = await createEndpoint();
    const event = await writeEvent('email.new', account, emailData());
    const sub = subscriber(200);
    await consume(recordingEnv().env, deliveryOptions({ fetch: sub.fetch, timeoutMs: 1000 }), [eventMessage(event)]);
    expect(sub.calls).toHaveLength(1);
    const fromFeed = (await api('GET', `/events/${event.id}`)).body;
    expect({ ...fromFeed, endpoint_id: endpoint.id }).toEqual(sub.calls[0]!.json);
  });

  it('the sweep prunes events older than 30 days with their delivery log, oldest first, in bounded steps', async () => {
    const account = await insertAccount();
    const endpoint = await createEndpoint();
    const now = Date.now();
    const day = 24 * 3600 * 1000;
    const old = newEvent('email.new', account, emailData());
    old.created_at = new Date(now - 31 * day).toISOString();
    const recent = newEvent('email.new', account, emailData());
    recent.created_at = new Date(now - 29 * day).toISOString();
    await env.DB.batch([
      eventStatement(env.DB, old),
      eventStatement(env.DB, recent),
      env.DB.prepare('UPDATE events SET enqueued_at = created_at, fanned_out_at = created_at WHERE id IN (?, ?)').bind(
        old.id,
        recent.id,
      ),
      env.DB.prepare(
        `INSERT INTO webhook_conversations (id, endpoint_id, event_id, event_type, status, attempts, created_at, updated_at)
         VALUES ('wc_old', ?, ?, 'email.new', 'delivered', 1, ?, ?)`,
      ).bind(endpoint.id, old.id, old.created_at, old.created_at),
    ]);
    const report = await runSweep(recordingEnv().env, now);
    expect(report.events_pruned).toBeGreaterThanOrEqual(1);
    expectError(await api('GET', `/events/${old.id}`), 404, 'not_found');
    expect((await api('GET', `/events/${recent.id}`)).status).toBe(200);
    expect((await conversations(endpoint.id)).map((c) => c.id)).not.toContain('wc_old');
  });
});
