/**
 * The consumer of the webhooks queue. `{kind: 'event'}` fans an outbox event out to its endpoints
 * (fanout.ts); `{kind: 'delivery'}` is one conversation's retry. Each message names the mail shard
 * holding its event and calls; a shard's share of the batch is handled on that shard, its calls
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
import { DIRECTORY_SHARD, shardByName, shardEnv, shardTag } from '../shards/registry.ts';
import { deliverConversations, type ShardCalls } from './delivery.ts';
import { type EnabledEndpoint, enabledEndpoints } from './endpoints.ts';
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

type EventMessage = Message<WebhookQueueMessage & { kind: 'event' }>;
type DeliveryMessage = Message<WebhookQueueMessage & { kind: 'delivery' }>;

/** One shard's share of a batch: its events and calls live in that database, and are handled there. */
interface ShardWork {
  env: Env;
  events: EventMessage[];
  deliveries: DeliveryMessage[];
}

export async function handleWebhookBatch(
  batch: MessageBatch<WebhookQueueMessage>,
  env: Env,
  options: DeliveryOptions = deliveryOptions(),
): Promise<void> {
  const work = new Map<string, ShardWork>();
  const workOf = (shard: string | undefined): ShardWork | null => {
    const name = shard ?? DIRECTORY_SHARD;
    let found = work.get(name);
    if (!found) {
      try {
        found = { env: shardEnv(env, shardByName(env, name)), events: [], deliveries: [] };
      } catch (err) {
        console.error(`webhook queue message of a shard this Worker does not bind:`, (err as Error).message);
        return null;
      }
      work.set(name, found);
    }
    return found;
  };
  for (const message of batch.messages) {
    const body = message.body;
    const shardWork = body?.kind === 'event' || body?.kind === 'delivery' ? workOf(body.shard) : null;
    if (body?.kind === 'event' && shardWork) shardWork.events.push(message as EventMessage);
    else if (body?.kind === 'delivery' && shardWork) shardWork.deliveries.push(message as DeliveryMessage);
    else if (body?.kind === 'event' || body?.kind === 'delivery') {
      // A binding missing in this version (a deploy under way): the queue tries again later, and
      // the sweep of a version that binds it sends whatever is left.
      retry(message);
    } else {
      console.error(`dropping unknown webhook queue message ${JSON.stringify(body).slice(0, 200)}`);
      message.ack();
    }
  }
  const endpoints = enabledEndpoints(env);
  // Every shard's events are fanned out first; then all their calls share one pool.
  const fanned = new Map<ShardWork, { id: string; event_id: string }[] | null>();
  for (const shardWork of work.values()) fanned.set(shardWork, await fanOutShard(shardWork, options, endpoints));
  let budget = MAX_CALLS_PER_INVOCATION;
  const calls: ShardCalls[] = [];
  for (const [shardWork, made] of fanned) {
    const ids = [
      ...new Set([...(made ?? []).map((f) => f.id), ...shardWork.deliveries.map((m) => m.body.conversation_id)]),
    ];
    const now = ids.slice(0, Math.max(0, budget));
    budget -= now.length;
    await requeue(shardWork.env, ids.slice(now.length));
    calls.push({ env: shardWork.env, ids: now });
  }
  const failed = await deliverConversations(calls, options, endpoints);
  for (const [{ events, deliveries }, made] of fanned) {
    const failedEvents = new Set((made ?? []).filter((f) => failed.has(f.id)).map((f) => f.event_id));
    for (const message of events) {
      if (made === null || failedEvents.has(message.body.event_id)) retry(message);
      else message.ack();
    }
    for (const message of deliveries) {
      if (failed.has(message.body.conversation_id)) retry(message);
      else message.ack();
    }
  }
}

const retry = (message: Message<WebhookQueueMessage>) =>
  message.retry({ delaySeconds: messageRetryDelay(message.attempts) });

/** Fans out one shard's events: their calls still waiting, or null when the fan-out failed. */
async function fanOutShard(
  { env, events }: ShardWork,
  options: DeliveryOptions,
  endpoints: () => Promise<Map<string, EnabledEndpoint>>,
): Promise<{ id: string; event_id: string }[] | null> {
  try {
    return await fanOut(
      env,
      options,
      events.map((m) => m.body.event_id),
      endpoints,
    );
  } catch (err) {
    console.error(`webhook fan-out of ${events.length} events failed:`, (err as Error).message);
    return null;
  }
}

/** Calls left for another invocation. They are waiting and due in D1, so if this fails the sweep sends them. */
async function requeue(env: Env, ids: string[]): Promise<void> {
  for (const part of chunks(ids, QUEUE_BATCH)) {
    try {
      await env.WEBHOOKS.sendBatch(
        part.map((conversation_id) => ({ body: { kind: 'delivery' as const, conversation_id, ...shardTag(env) } })),
      );
    } catch (err) {
      console.error(`re-enqueueing ${part.length} webhook calls failed; the sweep will:`, (err as Error).message);
    }
  }
}
