// GET /webhooks/conversations and POST /webhooks/conversations/{id}/retry: one endpoint's calls
// newest first with the payload as sent, and a retry that sends now and counts as an attempt.
import { describe, expect, it, vi } from 'vitest';
import type { OutboxEvent } from '../../worker/events/outbox.ts';
import { newId } from '../../worker/lib/ids.ts';
import { api, expectError } from './helpers.ts';
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

describe('webhook conversations API', () => {
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
      clock.now += SECOND;
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
