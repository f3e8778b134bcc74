/**
 * Making webhook calls. A call is a signed POST of the Event envelope; a 2xx answer within the
 * timeout is success, anything else is retried on a fixed schedule with jitter, then `failed`.
 *
 * Who sends a call: whoever claims it. Claiming sets `next_attempt_at` to a lease a little longer
 * than the timeout, in one conditional UPDATE, so a duplicate queue message or a sweep re-send of
 * the same conversation finds it not due and skips it; if the sender dies, the lease runs out and
 * the sweep hands the call out again. Calls are at-least-once; subscribers dedupe on `webhook-id`.
 */
import type { Env, WebhookQueueMessage } from '../env.ts';
import { newId } from '../lib/ids.ts';
import { iso } from '../lib/time.ts';
import { DELIVERY_SELECT, type DeliveryRow, envelope, WAITING_STATUSES } from './conversations.ts';
import type { EndpointHeader } from './endpoints.ts';
import { openEndpointSecret, signatureHeaders } from './signing.ts';

export interface DeliveryOptions {
  /** Outbound HTTP; tests route it to an in-test subscriber. */
  fetch: (url: string, init: RequestInit) => Promise<Response>;
  timeoutMs: number;
  now: () => number;
  /** In [0, 1): the jitter of retry delays. */
  random: () => number;
}

export const DELIVERY_TIMEOUT_MS = 15_000;

export function deliveryOptions(overrides: Partial<DeliveryOptions> = {}): DeliveryOptions {
  return {
    fetch: (url, init) => fetch(url, init),
    timeoutMs: DELIVERY_TIMEOUT_MS,
    now: () => Date.now(),
    random: Math.random,
    ...overrides,
  };
}

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

/** Waits before the 2nd, 3rd, … 10th attempt (DECISIONS.md, "Webhook calls"). */
const RETRY_DELAYS_MS = [
  5 * SECOND,
  5 * MINUTE,
  30 * MINUTE,
  2 * HOUR,
  5 * HOUR,
  10 * HOUR,
  14 * HOUR,
  20 * HOUR,
  24 * HOUR,
];
const JITTER = 0.1;

/** The wait after `attempts` failed attempts (±10 %), or null when the schedule is over. */
export function retryDelayMs(attempts: number, random: () => number): number | null {
  const base = RETRY_DELAYS_MS[attempts - 1];
  return base === undefined ? null : Math.round(base * (1 - JITTER + 2 * JITTER * random()));
}

/**
 * Queues hold a delayed message for at most 12 h. Longer waits stay in D1 only, and the sweep
 * enqueues them when they are due.
 */
export const MAX_QUEUE_DELAY_SECONDS = 12 * 60 * 60;

/** How long a claim keeps others off a call: the timeout plus room for the database writes. */
const leaseMs = (options: DeliveryOptions) => options.timeoutMs + MINUTE;

/** A queue message may arrive a little before the instant it was delayed to. */
const EARLY_TOLERANCE_MS = SECOND;

interface Outcome {
  ok: boolean;
  statusCode: number | null;
  error: string | null;
}

async function post(options: DeliveryOptions, url: string, headers: Headers, body: string): Promise<Outcome> {
  const signal = AbortSignal.timeout(options.timeoutMs);
  try {
    // Redirects are not followed: a 3xx is a failed attempt (and cannot lead the call elsewhere).
    const response = await options.fetch(url, { method: 'POST', headers, body, redirect: 'manual', signal });
    await response.body?.cancel().catch(() => {}); // only the status matters
    return { ok: response.ok, statusCode: response.status, error: response.ok ? null : `HTTP ${response.status}` };
  } catch (err) {
    if (signal.aborted) return { ok: false, statusCode: null, error: `timeout after ${options.timeoutMs / SECOND} s` };
    return { ok: false, statusCode: null, error: `network error: ${(err as Error).message}` };
  }
}

async function callHeaders(env: Env, row: DeliveryRow, body: string, now: number): Promise<Headers> {
  const headers = new Headers();
  for (const { key, value } of JSON.parse(row.headers_json) as EndpointHeader[]) headers.set(key, value);
  const secret = await openEndpointSecret(env.CREDENTIALS_KEY, row.endpoint_id, row.endpoint_secret);
  for (const [key, value] of Object.entries(
    await signatureHeaders(secret, row.event_id, body, Math.floor(now / SECOND)),
  )) {
    headers.set(key, value);
  }
  headers.set('Content-Type', 'application/json');
  return headers;
}

async function enqueueRetry(env: Env, conversationId: string, delayMs: number): Promise<void> {
  const delaySeconds = Math.ceil(delayMs / SECOND);
  if (delaySeconds > MAX_QUEUE_DELAY_SECONDS) return; // the sweep sends it when due
  try {
    const message: WebhookQueueMessage = { kind: 'delivery', conversation_id: conversationId };
    await env.WEBHOOKS.send(message, { delaySeconds });
  } catch (err) {
    console.error(`enqueueing retry of ${conversationId} failed; the sweep will send it:`, (err as Error).message);
  }
}

/**
 * Makes one call of the conversation and records it. An automatic attempt that fails moves the
 * schedule on (or ends it: `failed`). A manual attempt (the retry endpoint) counts as an attempt too,
 * but a failure leaves a running schedule as it was. A call dropped while in flight stays dropped.
 * Returns the row as updated.
 */
export async function attemptDelivery(
  env: Env,
  options: DeliveryOptions,
  row: DeliveryRow,
  { manual = false } = {},
): Promise<DeliveryRow> {
  const { body } = envelope(row);
  const outcome = await post(options, row.url, await callHeaders(env, row, body, options.now()), body);

  let retryAt: number | null = null;
  let delayMs: number | null = null;
  if (!outcome.ok) {
    if (manual && row.status === 'retrying') retryAt = row.next_attempt_at;
    else {
      delayMs = retryDelayMs(row.attempts + 1, options.random);
      retryAt = delayMs === null ? null : options.now() + delayMs;
    }
  }
  const updated = await env.DB.prepare(
    `UPDATE webhook_conversations SET
       attempts = attempts + 1, last_status_code = ?1, last_error = ?2, updated_at = ?3,
       status = CASE WHEN ?4 THEN 'delivered' WHEN status IN ${WAITING_STATUSES} THEN ?5 ELSE status END,
       next_attempt_at = CASE WHEN ?4 THEN NULL WHEN status IN ${WAITING_STATUSES} THEN ?6 ELSE next_attempt_at END
     WHERE id = ?7
     RETURNING status, attempts, last_status_code, last_error, next_attempt_at, updated_at`,
  )
    .bind(
      outcome.statusCode,
      outcome.error,
      iso(options.now()),
      outcome.ok ? 1 : 0,
      retryAt === null ? 'failed' : 'retrying',
      retryAt,
      row.id,
    )
    .first<
      Pick<DeliveryRow, 'status' | 'attempts' | 'last_status_code' | 'last_error' | 'next_attempt_at' | 'updated_at'>
    >();
  if (!updated) return row; // deleted meanwhile
  if (delayMs !== null && updated.status === 'retrying' && updated.next_attempt_at === retryAt) {
    await enqueueRetry(env, row.id, delayMs);
  }
  return { ...row, ...updated };
}

/** Which waiting conversations a claim looks at: one conversation, or all of one event's. */
type Scope = { column: 'id' | 'event_id'; value: string };

/**
 * Statements that drop the scope's waiting calls whose endpoint is paused or gone, then claim the
 * due ones (returning their ids).
 */
function claimStatements(db: D1Database, scope: Scope, now: number, lease: number): D1PreparedStatement[] {
  const waiting = `${scope.column} = ? AND status IN ${WAITING_STATUSES}`;
  return [
    db
      .prepare(
        `UPDATE webhook_conversations SET status = 'dropped', next_attempt_at = NULL, updated_at = ?
         WHERE ${waiting} AND NOT EXISTS (
           SELECT 1 FROM webhook_endpoints we WHERE we.id = webhook_conversations.endpoint_id AND we.enabled = 1)`,
      )
      .bind(iso(now), scope.value),
    db
      .prepare(
        `UPDATE webhook_conversations SET next_attempt_at = ? WHERE ${waiting} AND next_attempt_at <= ? RETURNING id`,
      )
      .bind(now + lease, scope.value, now + EARLY_TOLERANCE_MS),
  ];
}

/** Claims the scope's due calls (after running `before` in the same batch) and makes them concurrently. */
async function deliverDue(env: Env, options: DeliveryOptions, scope: Scope, before: D1PreparedStatement[] = []) {
  const now = options.now();
  const results = await env.DB.batch<{ id: string }>([
    ...before,
    ...claimStatements(env.DB, scope, now, leaseMs(options)),
  ]);
  const claimed = new Set(results[results.length - 1]!.results.map((r) => r.id));
  if (claimed.size === 0) return;
  const { results: rows } = await env.DB.prepare(`${DELIVERY_SELECT} WHERE c.${scope.column} = ?`)
    .bind(scope.value)
    .all<DeliveryRow>();
  // One slow subscriber must not hold up the others: every call runs at once, and every one is
  // recorded before an error (a database failure) is passed on for the queue to retry the message.
  const settled = await Promise.allSettled(
    rows.filter((r) => claimed.has(r.id)).map((r) => attemptDelivery(env, options, r)),
  );
  const failure = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failure) throw failure.reason;
}

/**
 * Fan-out of one outbox event: one conversation per enabled endpoint whose trigger_events include
 * the type and whose account_ids are empty or include the event's account (INSERT OR IGNORE on
 * UNIQUE(event_id, endpoint_id): a repeated queue message creates nothing twice), then the calls.
 */
export async function deliverEvent(env: Env, options: DeliveryOptions, eventId: string): Promise<void> {
  const event = await env.DB.prepare('SELECT id, type, account_id FROM events WHERE id = ?')
    .bind(eventId)
    .first<{ id: string; type: string; account_id: string | null }>();
  if (!event) {
    console.warn(`webhook fan-out: event ${eventId} does not exist; nothing to send`);
    return;
  }
  const { results: endpoints } = await env.DB.prepare(
    `SELECT id FROM webhook_endpoints
     WHERE enabled = 1
       AND EXISTS (SELECT 1 FROM json_each(trigger_events_json) WHERE value = ?1)
       AND (json_array_length(account_ids_json) = 0 OR EXISTS (SELECT 1 FROM json_each(account_ids_json) WHERE value = ?2))`,
  )
    .bind(event.type, event.account_id)
    .all<{ id: string }>();
  const now = options.now();
  const created = iso(now);
  // The endpoint is checked again as the row is written, so a pause in between creates nothing.
  const inserts = endpoints.map((endpoint) =>
    env.DB.prepare(
      `INSERT OR IGNORE INTO webhook_conversations
         (id, endpoint_id, event_id, event_type, status, attempts, next_attempt_at, created_at, updated_at)
       SELECT ?, id, ?, ?, 'pending', 0, ?, ?, ? FROM webhook_endpoints WHERE id = ? AND enabled = 1`,
    ).bind(newId('conversation', now), event.id, event.type, now, created, created, endpoint.id),
  );
  await deliverDue(env, options, { column: 'event_id', value: event.id }, inserts);
}

/** A retry from the queue: sent only if still waiting, due, and its endpoint still enabled. */
export function deliverConversation(env: Env, options: DeliveryOptions, conversationId: string): Promise<void> {
  return deliverDue(env, options, { column: 'id', value: conversationId });
}

/** A conversation with its event and endpoint, or null. */
export function loadDeliveryRow(db: D1Database, conversationId: string): Promise<DeliveryRow | null> {
  return db.prepare(`${DELIVERY_SELECT} WHERE c.id = ?`).bind(conversationId).first<DeliveryRow>();
}
