/**
 * The minute sweep (cron). Each step is bounded, so one run stays short however large the backlog;
 * what is left waits for the next minute.
 * 1. Outbox events whose fan-out never committed (`fanned_out_at IS NULL`) are dispatched again:
 *    those that never reached the queue after a short grace (a write may still be dispatching), those
 *    that did after the queue had time for all its retries (the consumer failed that long, e.g. D1
 *    was down, and the queue dropped the message). This replaces a dead-letter queue.
 * 2. Waiting calls that are due but were not picked up (a retry wait longer than the queue's delay
 *    limit, a lost queue message, a sender that died holding a lease) are put on the queue again.
 * 3. Expired Idempotency-Key records, gateway call nonces and tracking windows are deleted, and events
 *    older than 30 days with their delivery log (events/feed.ts).
 */
import { expiredScheduledCleanup } from '../send/scheduled.ts';
import type { Env, WebhookQueueMessage } from '../env.ts';
import { pruneStatements } from '../events/feed.ts';
import { dispatchEvents } from '../events/outbox.ts';
import { QUEUE_BATCH } from '../lib/sql.ts';
import { iso } from '../lib/time.ts';
import { shardEnv, shards, shardTag } from '../shards/registry.ts';
import { trackingCleanup } from '../tracking/limits.ts';
import { WAITING_STATUSES } from './conversations.ts';

const SWEEP_LIMIT = 500;
/** Every signed gateway call leaves a nonce for ten minutes: the sweep must keep up with a busy minute. */
const NONCE_SWEEP_LIMIT = 20_000;
/** An event younger than this may still be on its way to the queue. */
const OUTBOX_GRACE_MS = 30_000;
/**
 * An event enqueued longer ago than this and still not fanned out was given up by the queue: its
 * retries (max_retries = 5, backoff 2 … 32 s, wrangler.toml) take about a minute.
 */
export const QUEUE_GIVE_UP_MS = 3 * 60_000;
/** Old events pruned per run: with their conversations, a few thousand rows at most. */
const EVENT_PRUNE_LIMIT = 1000;
/** A call due for less than this probably has its queue message arriving right now. */
const RETRY_GRACE_MS = 60_000;

export interface SweepReport {
  events: number;
  retries: number;
  idempotency_keys: number;
  expired: number;
  events_pruned: number;
}

async function enqueueDueRetries(env: Env, now: number): Promise<number> {
  const { results } = await env.DB.prepare(
    `SELECT id FROM webhook_conversations
     WHERE status IN ${WAITING_STATUSES} AND next_attempt_at <= ? ORDER BY next_attempt_at LIMIT ?`,
  )
    .bind(now - RETRY_GRACE_MS, SWEEP_LIMIT)
    .all<{ id: string }>();
  for (let i = 0; i < results.length; i += QUEUE_BATCH) {
    const messages = results.slice(i, i + QUEUE_BATCH).map(({ id }): { body: WebhookQueueMessage } => ({
      body: { kind: 'delivery', conversation_id: id, ...shardTag(env) },
    }));
    try {
      await env.WEBHOOKS.sendBatch(messages);
    } catch (err) {
      console.error(`re-enqueueing ${messages.length} due webhook calls failed; next sweep:`, (err as Error).message);
    }
  }
  return results.length;
}

/** Events of env.DB's shard whose fan-out never committed, dispatched again (step 1). */
async function redispatchUnsent(env: Env, now: number): Promise<number> {
  const { results: unsent } = await env.DB.prepare(
    `SELECT id FROM events
     WHERE fanned_out_at IS NULL AND created_at < ? AND (enqueued_at IS NULL OR enqueued_at < ?)
     ORDER BY created_at LIMIT ?`,
  )
    .bind(iso(now - OUTBOX_GRACE_MS), iso(now - QUEUE_GIVE_UP_MS), SWEEP_LIMIT)
    .all<{ id: string }>();
  await dispatchEvents(
    env,
    unsent.map((e) => e.id),
  );
  return unsent.length;
}

export async function runSweep(env: Env, now: number = Date.now()): Promise<SweepReport> {
  // Events and their calls live in each mail shard.
  let unsent = 0;
  let retries = 0;
  for (const shard of shards(env)) {
    // A shard that fails is left for the next minute; the others and the directory's cleanup go on.
    try {
      const view = shardEnv(env, shard);
      unsent += await redispatchUnsent(view, now);
      retries += await enqueueDueRetries(view, now);
    } catch (err) {
      console.error(`sweep of webhook events in ${shard.name} failed:`, (err as Error).message);
    }
  }

  const [keys, nonces] = await env.DB.batch([
    env.DB.prepare(
      'DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM idempotency_keys WHERE expires_at < ? LIMIT ?)',
    ).bind(now, SWEEP_LIMIT),
    env.DB.prepare(
      'DELETE FROM gateway_nonces WHERE nonce IN (SELECT nonce FROM gateway_nonces WHERE expires_ms < ? LIMIT ?)',
    ).bind(now, NONCE_SWEEP_LIMIT),
  ]);
  // Tracking windows, expired scheduled sends and old events live in each mail shard.
  let expired = nonces!.meta.changes;
  let pruned = 0;
  for (const { db } of shards(env)) {
    const [hits, scheduled, , events] = await db.batch([
      trackingCleanup(db, now, SWEEP_LIMIT),
      expiredScheduledCleanup(db, now, SWEEP_LIMIT),
      ...pruneStatements(db, now, EVENT_PRUNE_LIMIT),
    ]);
    expired += hits!.meta.changes + scheduled!.meta.changes;
    pruned += events!.meta.changes;
  }
  return {
    events: unsent,
    retries,
    idempotency_keys: keys!.meta.changes,
    expired,
    events_pruned: pruned,
  };
}
