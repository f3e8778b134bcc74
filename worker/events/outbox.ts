/**
 * The outbox. A change and its event are written in the same D1 batch (`eventStatement` goes into
 * the change's batch); after the batch commits, `dispatchEvents` puts the event ids on the queue and
 * marks them enqueued. Until the consumer's fan-out commits (`fanned_out_at`), the scheduled sweep
 * re-sends the row whatever went wrong (crash, queue outage, a consumer failing past the queue's
 * retries): at-least-once, with a stable event id (docs/delivery.md).
 */
import { LIVE_ACCOUNT } from '../accounts/removed.ts';
import type { Env } from '../env.ts';
import { newId } from '../lib/ids.ts';
import { chunks, PARAM_CHUNK, placeholders, QUEUE_BATCH } from '../lib/sql.ts';
import { isoNow } from '../lib/time.ts';
import { currentShard, shardTag } from '../shards/registry.ts';
import type { EventType } from './types.ts';

export interface OutboxEvent {
  id: string;
  type: EventType;
  account_id: string | null;
  data: unknown;
  created_at: string;
}

/**
 * The assignment giving up a row's reserved bytes as one of its two marks is set (migrations/0022):
 * half of them while `other` is still unset, all of them once both are.
 */
export const ROOM_LEFT = (other: 'enqueued_at' | 'fanned_out_at'): string =>
  `room = CASE WHEN ${other} IS NULL THEN zeroblob(24) ELSE NULL END`;

export function newEvent(type: EventType, accountId: string | null, data: unknown): OutboxEvent {
  return { id: newId('event'), type, account_id: accountId, data, created_at: isoNow() };
}

/** JSON already made of an event's data (an email event's payload is measured as JSON when made). */
const dataJsonMade = new WeakMap<object, string>();

/** Remembers `json` as the JSON of `data`, which must not change afterwards. */
export function rememberDataJson(data: object, json: string): void {
  dataJsonMade.set(data, json);
}

/** The outbox row's `data_json`: made once per event. */
export const dataJson = (data: unknown): string =>
  (typeof data === 'object' && data !== null && dataJsonMade.get(data)) || JSON.stringify(data);

export function eventStatement(db: D1Database, event: OutboxEvent): D1PreparedStatement {
  return db
    .prepare('INSERT INTO events (id, type, account_id, data_json, created_at) VALUES (?, ?, ?, ?, ?)')
    .bind(event.id, event.type, event.account_id, dataJson(event.data), event.created_at);
}

/** The event's INSERT, made only while its account exists and is not being removed (0 changes otherwise). */
export function eventStatementIfLive(db: D1Database, event: OutboxEvent & { account_id: string }): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO events (id, type, account_id, data_json, created_at)
       SELECT ?1, ?2, ?3, ?4, ?5 WHERE ${LIVE_ACCOUNT('?3')}`,
    )
    .bind(event.id, event.type, event.account_id, dataJson(event.data), event.created_at);
}

/** Hand committed events to the queue (env.DB: the database they were written in). Failures are logged and left for the sweep; never thrown. */
export async function dispatchEvents(env: Env, eventIds: string[]): Promise<void> {
  // A chunk is one queue batch and one UPDATE, so it must fit both limits (ids + the timestamp).
  const shard = currentShard(env);
  const where = shardTag(env);
  for (const chunk of chunks(eventIds, Math.min(QUEUE_BATCH, PARAM_CHUNK))) {
    try {
      await env.WEBHOOKS.sendBatch(chunk.map((event_id) => ({ body: { kind: 'event' as const, event_id, ...where } })));
      await shard.db
        .prepare(
          `UPDATE events SET enqueued_at = ?, ${ROOM_LEFT('fanned_out_at')} WHERE id IN (${placeholders(chunk.length)})`,
        )
        .bind(isoNow(), ...chunk)
        .run();
    } catch (err) {
      console.error(`dispatching ${chunk.length} events failed; the sweep will retry:`, (err as Error).message);
    }
  }
}
