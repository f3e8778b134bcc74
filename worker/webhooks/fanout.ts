/**
 * Fan-out of outbox events: one conversation per enabled endpoint whose trigger_events include the
 * event's type and whose account_ids are empty or include the event's account. Endpoints live in the
 * directory (DB); an event and its conversations live in the event's mail shard (env.DB here). The
 * conversations and the events' `fanned_out_at` are written in one D1 batch of that shard (INSERT OR
 * IGNORE on UNIQUE(event_id, endpoint_id): a repeated message creates nothing twice). From then on
 * the calls live in D1 and no longer depend on the queue message: the sweep sends whatever stays due.
 * An endpoint paused or narrowed after it was read here is judged again just before each call
 * (audience.ts), so a conversation made meanwhile is dropped, never called.
 */
import type { Env } from '../env.ts';
import { ROOM_LEFT } from '../events/outbox.ts';
import { newId } from '../lib/ids.ts';
import { chunks, PARAM_CHUNK, placeholders } from '../lib/sql.ts';
import { iso } from '../lib/time.ts';
import { WAITING_STATUSES } from './conversations.ts';
import type { EnabledEndpoint } from './endpoints.ts';
import type { DeliveryOptions } from './schedule.ts';

interface EventRow {
  id: string;
  type: string;
  account_id: string | null;
}

/** Conversations per INSERT: four bound values each, plus three shared ones, within D1's 100. */
const ROWS_PER_INSERT = 24;

function matches(endpoint: { triggers: Set<string>; accounts: Set<string> }, event: EventRow): boolean {
  if (!endpoint.triggers.has(event.type)) return false;
  return endpoint.accounts.size === 0 || (event.account_id !== null && endpoint.accounts.has(event.account_id));
}

/** Fans the events out; returns their conversations still waiting for a call (new or left from before). */
export async function fanOut(
  env: Env,
  options: DeliveryOptions,
  eventIds: string[],
  readEndpoints: () => Promise<Map<string, EnabledEndpoint>>,
): Promise<{ id: string; event_id: string }[]> {
  const ids = [...new Set(eventIds)];
  if (ids.length === 0) return [];
  const db = env.DB;
  // The endpoints (directory) are read while the events (shard) are: two round trips at once, not in turn.
  const endpointsRead = readEndpoints();
  endpointsRead.catch(() => undefined); // awaited below unless no event is left
  const events: EventRow[] = [];
  for (const part of chunks(ids)) {
    const { results } = await db
      .prepare(`SELECT id, type, account_id FROM events WHERE id IN (${placeholders(part.length)})`)
      .bind(...part)
      .all<EventRow>();
    events.push(...results);
  }
  if (events.length < ids.length) console.warn(`webhook fan-out: ${ids.length - events.length} events no longer exist`);
  if (events.length === 0) return [];
  const endpoints = [...(await endpointsRead).values()].map((e) => ({
    id: e.id,
    triggers: new Set(JSON.parse(e.trigger_events_json) as string[]),
    accounts: new Set(JSON.parse(e.account_ids_json) as string[]),
  }));

  const now = options.now();
  const created = iso(now);
  const pairs = events.flatMap((event) =>
    endpoints
      .filter((endpoint) => matches(endpoint, event))
      .map((endpoint) => [newId('conversation', now), endpoint.id, event.id, event.type]),
  );
  const inserts = chunks(pairs, ROWS_PER_INSERT).map((part) =>
    db
      .prepare(
        `INSERT OR IGNORE INTO webhook_conversations
           (id, endpoint_id, event_id, event_type, status, attempts, next_attempt_at, created_at, updated_at)
         SELECT v.column1, v.column2, v.column3, v.column4, 'pending', 0, ?, ?, ?
         FROM (VALUES ${part.map(() => '(?, ?, ?, ?)').join(', ')}) AS v`,
      )
      .bind(now, created, created, ...part.flat()),
  );
  const found = events.map((e) => e.id);
  const marks = chunks(found, PARAM_CHUNK).map((part) =>
    db
      .prepare(
        `UPDATE events SET fanned_out_at = ?, ${ROOM_LEFT('enqueued_at')} WHERE id IN (${placeholders(part.length)})`,
      )
      .bind(created, ...part),
  );
  const reads = chunks(found, PARAM_CHUNK).map((part) =>
    db
      .prepare(
        `SELECT id, event_id FROM webhook_conversations
         WHERE event_id IN (${placeholders(part.length)}) AND status IN ${WAITING_STATUSES}`,
      )
      .bind(...part),
  );
  const results = await db.batch<{ id: string; event_id: string }>([...inserts, ...marks, ...reads]);
  return results.slice(inserts.length + marks.length).flatMap((r) => r.results);
}
