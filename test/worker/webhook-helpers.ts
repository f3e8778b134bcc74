/** Webhook test helpers: endpoints, outbox events, an in-test subscriber, a recording queue, one consumer run. */
import { createExecutionContext, createMessageBatch, getQueueResult } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { afterEach, beforeEach, expect, vi } from 'vitest';
import type { Env, WebhookQueueMessage } from '../../worker/env.ts';
import { eventStatement, newEvent, type OutboxEvent } from '../../worker/events/outbox.ts';
import type { EventType } from '../../worker/events/types.ts';
import { newId } from '../../worker/lib/ids.ts';
import { recordOutgoing } from '../../worker/send/outgoing.ts';
import { handleWebhookBatch } from '../../worker/webhooks/consumer.ts';
import { deliveryOptions, type DeliveryOptions } from '../../worker/webhooks/schedule.ts';
import { api } from './helpers.ts';

export const HOOK_URL = 'https://hooks.example.com/mailbox';

export const SECOND = 1000;

/** Empties what webhook tests fill (endpoints, calls, events, idempotency keys, accounts): run before each test. */
export async function emptyWebhookTables(): Promise<void> {
  await env.DB.batch(
    ['webhook_conversations', 'webhook_endpoints', 'events', 'idempotency_keys', 'accounts'].map((table) =>
      env.DB.prepare(`DELETE FROM ${table}`),
    ),
  );
}

export async function insertAccount(): Promise<string> {
  const id = newId('account');
  const now = new Date().toISOString();
  await env.DB.prepare(
    `INSERT INTO accounts (id, email, user_id, imap_host, imap_port, imap_encryption, smtp_host, smtp_port,
       smtp_encryption, smtp_user, credentials, created_at, updated_at)
     VALUES (?, ?, ?, 'imap.example.com', 993, 'SSL', 'smtp.example.com', 465, 'SSL', ?, 'sealed', ?, ?)`,
  )
    .bind(id, `${id}@example.com`, id, id, now, now)
    .run();
  return id;
}

/** A tracked send of a new account, as the send path records it: its tracking id. */
export async function insertTrackedSend(): Promise<string> {
  const trackingId = newId('tracking');
  await recordOutgoing(env.DB, {
    account_id: await insertAccount(),
    message_id: `<t-${crypto.randomUUID()}@example.test>`,
    kind: 'send',
    tracking_id: trackingId,
    tracking_label: null,
    draft_id: null,
    created_at: new Date().toISOString(),
  });
  return trackingId;
}

export async function createEndpoint(fields: Record<string, unknown> = {}) {
  const res = await api('POST', '/webhooks/endpoints', {
    body: { url: HOOK_URL, trigger_events: ['email.new'], ...fields },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body as { id: string; secret: string; url: string; [key: string]: unknown };
}

export type Answer = number | 'hang' | 'network-error';

export interface Call {
  url: string;
  headers: Headers;
  body: string;
  json: any;
}

/** A webhook subscriber: records every call and gives the next answer (the last one repeats). */
export function subscriber(...answers: Answer[]) {
  const calls: Call[] = [];
  const queue = answers.length ? answers : [200];
  const fetch: DeliveryOptions['fetch'] = async (url, init) => {
    const body = String(init.body);
    calls.push({ url, headers: new Headers(init.headers), body, json: JSON.parse(body) });
    const answer = queue.length > 1 ? queue.shift()! : queue[0]!;
    if (answer === 'network-error') throw new TypeError('connection refused');
    if (answer === 'hang') {
      return new Promise((_, reject) => init.signal!.addEventListener('abort', () => reject(init.signal!.reason)));
    }
    return new Response(`answer ${answer}`, { status: answer });
  };
  return { calls, fetch };
}

/**
 * Delivery options on a clock the test moves (`now`): calls go to the in-test subscriber `sub`, the
 * jitter is fixed at its middle, a call times out after 50 ms; `overrides` change any of them.
 */
export const deliveryOptionsAt =
  (now: () => number) =>
  (sub: ReturnType<typeof subscriber>, overrides: Partial<DeliveryOptions> = {}): DeliveryOptions =>
    deliveryOptions({ fetch: sub.fetch, now, random: () => 0.5, timeoutMs: 50, ...overrides });

/**
 * A webhook test file's setup: before each test the webhook tables are emptied and the clock set to
 * now (tests move it: `clock.now += …`), after it mocks are restored. `options` are delivery
 * options on that clock.
 */
export function webhookTestSetup() {
  const clock = { now: Date.now() };
  beforeEach(async () => {
    clock.now = Date.now();
    await emptyWebhookTables();
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });
  return { clock, options: deliveryOptionsAt(() => clock.now) };
}

export interface Sent {
  body: WebhookQueueMessage;
  delaySeconds?: number;
}

/** The test's env, whose queue records messages instead of delivering them. */
export function recordingEnv(): { env: Env; sent: Sent[] } {
  const sent: Sent[] = [];
  const queue = {
    async send(body: WebhookQueueMessage, options?: QueueSendOptions) {
      sent.push({ body, delaySeconds: options?.delaySeconds });
    },
    async sendBatch(messages: Iterable<MessageSendRequest<WebhookQueueMessage>>, options?: QueueSendBatchOptions) {
      for (const m of messages) sent.push({ body: m.body, delaySeconds: m.delaySeconds ?? options?.delaySeconds });
    },
  };
  return { env: { ...env, WEBHOOKS: queue as unknown as Queue<WebhookQueueMessage> }, sent };
}

export async function consume(testEnv: Env, opts: DeliveryOptions, bodies: WebhookQueueMessage[], attempts = 1) {
  const batch = createMessageBatch<WebhookQueueMessage>(
    'mailbox-webhooks',
    bodies.map((body, i) => ({ id: `msg-${i}`, timestamp: new Date(opts.now()), attempts, body })),
  );
  const ctx = createExecutionContext();
  await handleWebhookBatch(batch, testEnv, opts);
  return getQueueResult(batch, ctx);
}

/** An outbox event, marked as handed to the queue (the test then plays the queue's part). */
export async function writeEvent(type: EventType, accountId: string | null, data: unknown): Promise<OutboxEvent> {
  const event = newEvent(type, accountId, data);
  await env.DB.batch([
    eventStatement(env.DB, event),
    env.DB.prepare('UPDATE events SET enqueued_at = ? WHERE id = ?').bind(event.created_at, event.id),
  ]);
  return event;
}

export const eventMessage = (event: OutboxEvent): WebhookQueueMessage => ({ kind: 'event', event_id: event.id });

export async function conversations(endpointId?: string) {
  const sql = `SELECT * FROM webhook_conversations ${endpointId ? 'WHERE endpoint_id = ?' : ''} ORDER BY created_at, id`;
  const stmt = env.DB.prepare(sql);
  return (await (endpointId ? stmt.bind(endpointId) : stmt).all<Record<string, any>>()).results;
}

export const emailData = (body = '<p>Hi</p>') => ({
  object: 'Email',
  id: newId('email'),
  subject: 'Hello',
  body,
  body_plain: 'Hi',
});
