/**
 * The consumer of the webhooks queue. `{kind: 'event'}` fans an outbox event out to its endpoints
 * (fanout.ts); `{kind: 'delivery'}` is one conversation's retry. The whole batch's calls then go
 * through one pool of at most MAX_CALLS_IN_FLIGHT (delivery.ts).
 *
 * A message is acknowledged once what it stands for is safe in D1: an event once its fan-out
 * committed and its calls were made or recorded as due. A message whose handling failed (a database
 * error) is retried by the queue. There is no dead-letter queue: after the queue's last retry the
 * message is dropped, and the sweep re-sends every event whose fan-out never committed and every
 * call still due (sweep.ts), so an event reaches its subscribers however long D1 was away.
 */
import type { Env, WebhookQueueMessage } from '../env.ts';
import { chunks, QUEUE_BATCH } from '../lib/sql.ts';
import { deliverConversations } from './delivery.ts';
import { fanOut } from './fanout.ts';
import { type DeliveryOptions, deliveryOptions } from './schedule.ts';

/**
 * Calls one invocation makes at most; the rest go back on the queue as their own messages. Each
 * call costs an outbound request and a share of the claim and record statements, and an invocation
 * may make 1,000 subrequests and D1 queries (Workers Paid).
 */
export const MAX_CALLS_PER_INVOCATION = 300;

/** Backoff of a failed message: 2, 4, 8 … seconds, at most a minute. */
const messageRetryDelay = (attempts: number) => Math.min(60, 2 ** attempts);

export async function handleWebhookBatch(
  batch: MessageBatch<WebhookQueueMessage>,
  env: Env,
  options: DeliveryOptions = deliveryOptions(),
): Promise<void> {
  const events: Message<WebhookQueueMessage & { kind: 'event' }>[] = [];
  const deliveries: Message<WebhookQueueMessage & { kind: 'delivery' }>[] = [];
  for (const message of batch.messages) {
    const body = message.body;
    if (body?.kind === 'event' && body.shard !== undefined) {
      // Webhook calls are made for the events DB holds; an event of another mail shard stays in its
      // outbox, unfanned (docs/capacity.md).
      console.warn(`webhook fan-out: event ${body.event_id} is in mail shard ${body.shard}; not delivered`);
      message.ack();
    } else if (body?.kind === 'event') events.push(message as (typeof events)[number]);
    else if (body?.kind === 'delivery') deliveries.push(message as (typeof deliveries)[number]);
    else {
      console.error(`dropping unknown webhook queue message ${JSON.stringify(body).slice(0, 200)}`);
      message.ack();
    }
  }
  const retry = (message: Message<WebhookQueueMessage>) =>
    message.retry({ delaySeconds: messageRetryDelay(message.attempts) });

  let fanned: { id: string; event_id: string }[] = [];
  let fanOutFailed = false;
  try {
    fanned = await fanOut(
      env,
      options,
      events.map((m) => m.body.event_id),
    );
  } catch (err) {
    console.error(`webhook fan-out of ${events.length} events failed:`, (err as Error).message);
    fanOutFailed = true;
  }
  const ids = [...new Set([...fanned.map((f) => f.id), ...deliveries.map((m) => m.body.conversation_id)])];
  await requeue(env, ids.slice(MAX_CALLS_PER_INVOCATION));
  const failed = await deliverConversations(env, options, ids.slice(0, MAX_CALLS_PER_INVOCATION));
  const failedEvents = new Set(fanned.filter((f) => failed.has(f.id)).map((f) => f.event_id));
  for (const message of events) {
    if (fanOutFailed || failedEvents.has(message.body.event_id)) retry(message);
    else message.ack();
  }
  for (const message of deliveries) {
    if (failed.has(message.body.conversation_id)) retry(message);
    else message.ack();
  }
}

/** Calls left for another invocation. They are waiting and due in D1, so if this fails the sweep sends them. */
async function requeue(env: Env, ids: string[]): Promise<void> {
  for (const part of chunks(ids, QUEUE_BATCH)) {
    try {
      await env.WEBHOOKS.sendBatch(
        part.map((conversation_id) => ({ body: { kind: 'delivery' as const, conversation_id } })),
      );
    } catch (err) {
      console.error(`re-enqueueing ${part.length} webhook calls failed; the sweep will:`, (err as Error).message);
    }
  }
}
