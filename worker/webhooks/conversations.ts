/**
 * Webhook conversations: one call of one event to one endpoint, with its attempts. The body of the
 * call (the Event envelope) is not stored: it is rebuilt from the event row, the same bytes every time.
 *
 * Statuses: `pending` (not tried yet), `retrying` (waiting for `next_attempt_at`), `delivered`,
 * `failed` (schedule exhausted), `dropped` (endpoint paused or deleted while the call was waiting).
 * While a call is being made, `next_attempt_at` holds a lease (see delivery.ts), so nobody else sends it.
 */
import { completeEmailEvents } from '../emails/event-data.ts';
import { type Envelope, eventEnvelope } from '../events/envelope.ts';
import type { Env } from '../env.ts';
import { chunks, placeholders } from '../lib/sql.ts';
import { invalid } from '../lib/errors.ts';
import { isoNow } from '../lib/time.ts';
import { visibleEvent } from '../events/feed.ts';
import { directoryDb, isSharded } from '../shards/registry.ts';
import type { EnabledEndpoint } from './endpoints.ts';
import { keyOrder, onEveryShard } from '../shards/spread.ts';

export type ConversationStatus = 'pending' | 'retrying' | 'delivered' | 'failed' | 'dropped';

/** SQL list of the statuses whose call is still to be made. */
export const WAITING_STATUSES = "('pending', 'retrying')";

/**
 * SQL: drops the waiting calls matching `where` (they are never made later); `set` names the other
 * columns the drop writes (placeholders of `set` come before those of `where`).
 */
export function dropWaitingSql(set: string, where: string): string {
  return `UPDATE webhook_conversations SET status = 'dropped', next_attempt_at = NULL, ${set}
    WHERE status IN ${WAITING_STATUSES} AND ${where}`;
}

/** A conversation with its event and its endpoint: everything needed to show or send it. */
export interface DeliveryRow {
  id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  status: ConversationStatus;
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  next_attempt_at: number | null;
  created_at: string;
  updated_at: string;
  event_account_id: string | null;
  event_data_json: string;
  event_created_at: string;
  url: string;
  headers_json: string;
  endpoint_secret: string; // sealed
  endpoint_enabled: number;
}

/** A conversation joined with its event (both in the event's mail shard); its endpoint comes from the directory. */
export const DELIVERY_SELECT = `SELECT c.id, c.endpoint_id, c.event_id, c.event_type, c.status, c.attempts,
    c.last_status_code, c.last_error, c.next_attempt_at, c.created_at, c.updated_at,
    ev.account_id AS event_account_id, ev.data_json AS event_data_json, ev.created_at AS event_created_at
  FROM webhook_conversations c
  JOIN events ev ON ev.id = c.event_id`;

type ConversationRow = Omit<DeliveryRow, 'url' | 'headers_json' | 'endpoint_secret' | 'endpoint_enabled'>;

type EndpointColumns = Pick<DeliveryRow, 'url' | 'headers_json' | 'endpoint_secret' | 'endpoint_enabled'>;

/** The endpoints named, as the directory has them now. */
async function endpointsByIds(env: Env, ids: string[]): Promise<Map<string, EndpointColumns>> {
  const found = new Map<string, EndpointColumns>();
  for (const part of chunks(ids)) {
    const { results } = await directoryDb(env)
      .prepare(
        `SELECT id, url, headers_json, secret AS endpoint_secret, enabled AS endpoint_enabled FROM webhook_endpoints
         WHERE id IN (${placeholders(part.length)})`,
      )
      .bind(...part)
      .all<EndpointColumns & { id: string }>();
    for (const { id, ...endpoint } of results) found.set(id, endpoint);
  }
  return found;
}

/**
 * Rows read with DELIVERY_SELECT from env.DB (a mail shard), with their endpoint and their event
 * data as it was made (emails/event-data.ts). The endpoints come from `enabled` (the consumer's
 * reading of the enabled ones) or else from the directory. A row whose endpoint is not found is left
 * out.
 */
export async function completeDeliveryRows(
  env: Env,
  rows: ConversationRow[],
  enabled?: Map<string, EnabledEndpoint>,
): Promise<DeliveryRow[]> {
  const endpoints: Map<string, EndpointColumns> = enabled
    ? new Map([...enabled].map(([id, e]) => [id, { ...e, endpoint_enabled: 1 }]))
    : await endpointsByIds(env, [...new Set(rows.map((r) => r.endpoint_id))]);
  const joined = rows.flatMap((row) => {
    const endpoint = endpoints.get(row.endpoint_id);
    if (!endpoint) return [];
    const { url, headers_json, endpoint_secret, endpoint_enabled } = endpoint;
    return [{ ...row, url, headers_json, endpoint_secret, endpoint_enabled }];
  });
  return completeEmailEvents(env.DB, joined, 'event_data_json');
}

/** How deep an offset page of calls may start with several shards: each shard reads that many keys first. */
export const MAX_SHARDED_OFFSET = 10_000;

/** The calls of one endpoint (of one event, if given), newest first: an offset page over every shard. */
export async function listConversations(
  env: Env,
  filter: { endpointId: string; eventId?: string },
  limit: number,
  offset: number,
): Promise<DeliveryRow[]> {
  const where = `c.endpoint_id = ? AND ${visibleEvent('ev.')}${filter.eventId === undefined ? '' : ' AND c.event_id = ?'}`;
  const binds = filter.eventId === undefined ? [filter.endpointId] : [filter.endpointId, filter.eventId];
  const order = 'ORDER BY c.created_at DESC, c.id DESC';
  if (!isSharded(env)) {
    const { results } = await env.DB.prepare(`${DELIVERY_SELECT} WHERE ${where} ${order} LIMIT ? OFFSET ?`)
      .bind(...binds, limit + 1, offset)
      .all<ConversationRow>();
    return completeDeliveryRows(env, results);
  }
  // The page's keys first (each shard's first offset + limit + 1, merged), then its rows where they are.
  if (offset > MAX_SHARDED_OFFSET)
    throw invalid(
      `offset: at most ${MAX_SHARDED_OFFSET} in a workspace with several mail databases; narrow the list with event_id`,
    );
  const newestFirst = keyOrder((r: { created_at: string; id: string }) => [r.created_at, r.id], [true, true]);
  const keys = await onEveryShard(env, async (shardEnv) => {
    const { results } = await shardEnv.DB.prepare(
      `SELECT c.created_at, c.id FROM webhook_conversations c JOIN events ev ON ev.id = c.event_id
       WHERE ${where} ${order} LIMIT ?`,
    )
      .bind(...binds, offset + limit + 1)
      .all<{ created_at: string; id: string }>();
    return results.map((r) => ({ ...r, env: shardEnv }));
  });
  const page = keys
    .flat()
    .sort(newestFirst)
    .slice(offset, offset + limit + 1);
  const rows: DeliveryRow[] = [];
  for (const shardEnv of new Set(page.map((k) => k.env))) {
    // Up to limit + 1 ids: one bound JSON array, within D1's 100 bound values.
    const ids = JSON.stringify(page.filter((k) => k.env === shardEnv).map((k) => k.id));
    const { results } = await shardEnv.DB.prepare(`${DELIVERY_SELECT} WHERE c.id IN (SELECT value FROM json_each(?))`)
      .bind(ids)
      .all<ConversationRow>();
    rows.push(...(await completeDeliveryRows(shardEnv, results)));
  }
  return rows.sort(newestFirst);
}

/** The Event envelope of a call (events/envelope.ts), the same bytes every time. */
export function envelope(row: DeliveryRow): Envelope {
  return eventEnvelope(
    {
      id: row.event_id,
      type: row.event_type,
      account_id: row.event_account_id,
      data_json: row.event_data_json,
      created_at: row.event_created_at,
    },
    row.endpoint_id,
  );
}

export function presentConversation(row: DeliveryRow) {
  return {
    object: 'WebhookConversation' as const,
    id: row.id,
    endpoint_id: row.endpoint_id,
    event_id: row.event_id,
    event: row.event_type,
    status: row.status,
    attempts: row.attempts,
    last_status_code: row.last_status_code,
    last_error: row.last_error,
    payload: envelope(row).payload,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

/** Pausing or deleting an endpoint drops its waiting calls: they are never sent later. */
export function dropWaitingStatement(db: D1Database, endpointId: string): D1PreparedStatement {
  return db.prepare(dropWaitingSql('updated_at = ?', 'endpoint_id = ?')).bind(isoNow(), endpointId);
}

/**
 * Runs an endpoint change's drop of waiting calls on every shard. The change itself is made (in the
 * directory) and every call checks the endpoint just before it is made, so a shard that fails here
 * only keeps showing its calls waiting until they are dropped then: logged, not thrown.
 */
export async function dropOnEveryShard(
  env: Env,
  endpointId: string,
  drop: (db: D1Database) => D1PreparedStatement,
): Promise<number> {
  const dropped = await onEveryShard(env, (shardEnv, shard) =>
    drop(shardEnv.DB)
      .run()
      .then((r) => r.meta.changes)
      .catch((err: unknown) => {
        console.error(`dropping waiting calls of ${endpointId} in ${shard.name} failed:`, (err as Error).message);
        return 0;
      }),
  );
  return dropped.reduce((a, b) => a + b, 0);
}
