/**
 * Making webhook calls. A call is a signed POST of the Event envelope; a 2xx answer within the
 * timeout is success, anything else is retried on a fixed schedule with jitter, then `failed`.
 *
 * Who sends a call: whoever claims it. Claiming sets `next_attempt_at` to a lease a little longer
 * than the timeout, in one conditional UPDATE, so a duplicate queue message or a sweep re-send of
 * the same conversation finds it not due and skips it; if the sender dies, the lease runs out and
 * the sweep hands the call out again. Calls are at-least-once; subscribers dedupe on `webhook-id`.
 *
 * Every automatic attempt is counted by its claim, before it goes on the wire: an attempt whose
 * outcome is never written (the consumer died, D1 failed) still shows in the log, as an attempt
 * with `last_error` saying so, and is made again once its lease runs out.
 */
import type { Env, WebhookQueueMessage } from '../env.ts';
import { visibleEvent } from '../events/feed.ts';
import { placeholders } from '../lib/sql.ts';
import { iso } from '../lib/time.ts';
import { shardTag } from '../shards/registry.ts';
import { currentEndpoint, NO_LONGER_WANTED } from './audience.ts';
import { makeCall, type Outcome, type SecretCache } from './call.ts';
import type { EnabledEndpoint } from './endpoints.ts';
import {
  completeDeliveryRows,
  DELIVERY_SELECT,
  type DeliveryRow,
  dropWaitingSql,
  WAITING_STATUSES,
} from './conversations.ts';
import {
  type DeliveryOptions,
  CLAIM_AHEAD,
  leaseMs,
  MAX_CALLS_IN_FLIGHT,
  MAX_QUEUE_DELAY_SECONDS,
  retryDelayMs,
  SECOND,
} from './schedule.ts';

/** What a claimed attempt says until its outcome is written over it. */
export const UNRECORDED_ATTEMPT = 'no outcome recorded: the attempt was interrupted and will be made again';

/** A queue message may arrive a little before the instant it was delayed to. */
const EARLY_TOLERANCE_MS = SECOND;

type Updated = Pick<
  DeliveryRow,
  'status' | 'attempts' | 'last_status_code' | 'last_error' | 'next_attempt_at' | 'updated_at'
>;

/**
 * One D1 batch of env.DB's shard that drops the calls among `ids` whose endpoint is not among the
 * `enabled` ones (paused or gone: no attempt counted), claims the due ones (counting their attempt)
 * and reads them back. Returns the claimed rows, with their endpoints.
 */
async function claim(
  env: Env,
  ids: string[],
  options: DeliveryOptions,
  enabled: Map<string, EnabledEndpoint>,
): Promise<DeliveryRow[]> {
  const db = env.DB;
  const now = options.now();
  const lease = now + leaseMs(options);
  const list = placeholders(ids.length);
  const [, claimedIds, read] = await db.batch<{ id: string }>([
    db
      .prepare(
        dropWaitingSql('updated_at = ?', `id IN (${list}) AND endpoint_id NOT IN (SELECT value FROM json_each(?))`),
      )
      .bind(iso(now), ...ids, JSON.stringify([...enabled.keys()])),
    db
      .prepare(
        `UPDATE webhook_conversations SET next_attempt_at = ?, attempts = attempts + 1, last_status_code = NULL,
           last_error = ?, updated_at = ?
         WHERE id IN (${list}) AND status IN ${WAITING_STATUSES} AND next_attempt_at <= ? RETURNING id`,
      )
      .bind(lease, UNRECORDED_ATTEMPT, iso(now), ...ids, now + EARLY_TOLERANCE_MS),
    db.prepare(`${DELIVERY_SELECT} WHERE c.id IN (${list}) AND c.next_attempt_at = ?`).bind(...ids, lease),
  ]);
  const claimed = new Set(claimedIds!.results.map((r) => r.id));
  const rows = (read!.results as unknown as DeliveryRow[]).filter((r) => claimed.has(r.id));
  return completeDeliveryRows(env, rows, enabled);
}

/**
 * The statement recording an attempt's outcome. An automatic attempt that fails moves the schedule
 * on (or ends it: `failed`). A manual attempt (the retry endpoint) is counted here, and its failure
 * leaves a running schedule as it was. A call dropped while in flight stays dropped.
 */
function recordStatement(
  db: D1Database,
  options: DeliveryOptions,
  row: DeliveryRow,
  outcome: Outcome,
  manual: boolean,
): { statement: D1PreparedStatement; retryAt: number | null; delayMs: number | null } {
  let retryAt: number | null = null;
  let delayMs: number | null = null;
  if (!outcome.ok) {
    if (manual && row.status === 'retrying') retryAt = row.next_attempt_at;
    else {
      // `row.attempts` already counts an automatic attempt (its claim did).
      delayMs = retryDelayMs(manual ? row.attempts + 1 : row.attempts, options.random);
      retryAt = delayMs === null ? null : options.now() + delayMs;
    }
  }
  const statement = db
    .prepare(
      `UPDATE webhook_conversations SET
         attempts = attempts + ?1, last_status_code = ?2, last_error = ?3, updated_at = ?4,
         status = CASE WHEN ?5 THEN 'delivered' WHEN status IN ${WAITING_STATUSES} THEN ?6 ELSE status END,
         next_attempt_at = CASE WHEN ?5 THEN NULL WHEN status IN ${WAITING_STATUSES} THEN ?7 ELSE next_attempt_at END
       WHERE id = ?8
       RETURNING status, attempts, last_status_code, last_error, next_attempt_at, updated_at`,
    )
    .bind(
      manual ? 1 : 0,
      outcome.statusCode,
      outcome.error,
      iso(options.now()),
      outcome.ok ? 1 : 0,
      retryAt === null ? 'failed' : 'retrying',
      retryAt,
      row.id,
    );
  return { statement, retryAt, delayMs };
}

async function enqueueRetry(env: Env, conversationId: string, delayMs: number): Promise<void> {
  const delaySeconds = Math.ceil(delayMs / SECOND);
  if (delaySeconds > MAX_QUEUE_DELAY_SECONDS) return; // the sweep sends it when due
  try {
    const message: WebhookQueueMessage = { kind: 'delivery', conversation_id: conversationId, ...shardTag(env) };
    await env.WEBHOOKS.send(message, { delaySeconds });
  } catch (err) {
    console.error(`enqueueing retry of ${conversationId} failed; the sweep will send it:`, (err as Error).message);
  }
}

/** Writes outcomes in groups: while one D1 batch is on its way, the next outcomes wait for the next one. */
class Recorder {
  #waiting: { statement: D1PreparedStatement; done: (r: Updated | null) => void; fail: (e: unknown) => void }[] = [];
  #draining = false;
  readonly #db: D1Database;
  constructor(db: D1Database) {
    this.#db = db;
  }

  write(statement: D1PreparedStatement): Promise<Updated | null> {
    const written = new Promise<Updated | null>((done, fail) => this.#waiting.push({ statement, done, fail }));
    if (!this.#draining) void this.#drain();
    return written;
  }

  async #drain(): Promise<void> {
    this.#draining = true;
    while (this.#waiting.length) {
      const group = this.#waiting.splice(0, 50);
      try {
        const results = await this.#db.batch<Updated>(group.map((g) => g.statement));
        for (const [i, g] of group.entries()) g.done(results[i]!.results[0] ?? null);
      } catch (err) {
        for (const g of group) g.fail(err);
      }
    }
    this.#draining = false;
  }
}

/** Drops a claimed call its endpoint no longer wants; the claim's attempt is taken back (none was made). */
function dropStatement(db: D1Database, options: DeliveryOptions, row: DeliveryRow, manual: boolean) {
  return db
    .prepare(
      `${dropWaitingSql('attempts = attempts - ?1, last_status_code = NULL, last_error = ?2, updated_at = ?3', 'id = ?4')}
       RETURNING status, attempts, last_status_code, last_error, next_attempt_at, updated_at`,
    )
    .bind(manual ? 0 : 1, NO_LONGER_WANTED, iso(options.now()), row.id);
}

async function attempt(
  env: Env,
  options: DeliveryOptions,
  claimed: DeliveryRow,
  io: { secrets: SecretCache; write: (s: D1PreparedStatement) => Promise<Updated | null> },
  manual: boolean,
): Promise<DeliveryRow> {
  // The endpoint as it is just before the call: a pause, deletion, new URL or narrower filter since the claim counts.
  let row = claimed;
  const outcome = await makeCall(env, options, io.secrets, claimed, async () => {
    const current = await currentEndpoint(env, claimed);
    if (current) row = { ...claimed, ...current };
    return current;
  });
  if (!outcome) {
    console.log(`webhook call ${claimed.id} to ${claimed.endpoint_id} ${NO_LONGER_WANTED}`);
    const updated = await io.write(dropStatement(env.DB, options, claimed, manual));
    return updated ? { ...claimed, ...updated } : claimed;
  }
  const { statement, retryAt, delayMs } = recordStatement(env.DB, options, row, outcome, manual);
  const updated = await io.write(statement);
  if (!updated) return row; // deleted meanwhile
  if (delayMs !== null && updated.status === 'retrying' && updated.next_attempt_at === retryAt) {
    await enqueueRetry(env, row.id, delayMs);
  }
  return { ...row, ...updated };
}

/** Wakes whoever waits for the pool's state to change (a row claimed, taken, or the claims over). */
class Signal {
  #waiters: (() => void)[] = [];
  wait(): Promise<void> {
    return new Promise((resolve) => this.#waiters.push(resolve));
  }
  notify(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const wake of waiters) wake();
  }
}

/** Calls to make in one shard: their ids, and env with that shard as its DB. */
export interface ShardCalls {
  env: Env;
  ids: string[];
}

/**
 * Makes the due calls among `groups` (of any shards) with one pool of MAX_CALLS_IN_FLIGHT slots.
 * Claims run ahead of the slots by at most CLAIM_AHEAD calls (so a claimed call waits for a slot at
 * most a few calls' time, which its lease covers), and outcomes are written in groups per shard: a
 * few D1 round trips per dozen calls. Returns the ids whose handling failed (a database error): the
 * caller has the queue retry their messages, and the sweep re-sends whatever a lease still holds.
 */
export async function deliverConversations(
  groups: ShardCalls[],
  options: DeliveryOptions,
  readEndpoints: () => Promise<Map<string, EnabledEndpoint>>,
): Promise<Set<string>> {
  const failed = new Set<string>();
  const todo = groups.flatMap(({ env, ids }) => [...new Set(ids)].map((id) => ({ env, id })));
  const ready: { env: Env; row: DeliveryRow }[] = [];
  const changed = new Signal();
  let claimsOver = false;
  const recorders = new Map<Env, Recorder>();
  const recorderOf = (env: Env) => recorders.get(env) ?? recorders.set(env, new Recorder(env.DB)).get(env)!;
  const secrets: SecretCache = new Map();

  const claimer = async () => {
    while (todo.length) {
      while (ready.length > CLAIM_AHEAD / 2) await changed.wait();
      // A claim is one batch of one shard: the next calls of the same shard, up to the room ahead.
      const env = todo[0]!.env;
      let take = 0;
      while (take < CLAIM_AHEAD - ready.length && todo[take]?.env === env) take++;
      const group = todo.splice(0, take).map((t) => t.id);
      try {
        const rows = await claim(env, group, options, await readEndpoints());
        ready.push(...rows.map((row) => ({ env, row })));
      } catch (err) {
        console.error(`claiming ${group.length} webhook calls failed:`, (err as Error).message);
        for (const id of [...group, ...todo.splice(0).map((t) => t.id)]) failed.add(id);
      }
      changed.notify();
    }
    claimsOver = true;
    changed.notify();
  };
  const slot = async () => {
    for (;;) {
      const next = ready.shift();
      if (next) {
        changed.notify();
        const io = { secrets, write: (s: D1PreparedStatement) => recorderOf(next.env).write(s) };
        await attempt(next.env, options, next.row, io, false).catch((err: unknown) => {
          console.error(`recording webhook call ${next.row.id} failed:`, (err as Error).message);
          failed.add(next.row.id);
        });
      } else if (claimsOver) return;
      else await changed.wait();
    }
  };
  await Promise.all([claimer(), ...Array.from({ length: MAX_CALLS_IN_FLIGHT }, slot)]);
  return failed;
}

/** A manual attempt (POST /webhooks/conversations/{id}/retry): made now, whatever the schedule says. */
export function attemptDelivery(env: Env, options: DeliveryOptions, row: DeliveryRow): Promise<DeliveryRow> {
  const io = { secrets: new Map() as SecretCache, write: (s: D1PreparedStatement) => s.first<Updated>() };
  return attempt(env, options, row, io, true);
}

/** A conversation with its event and endpoint, or null (also for a removed account's event); env.DB: its shard. */
export async function loadDeliveryRow(env: Env, conversationId: string): Promise<DeliveryRow | null> {
  const row = await env.DB.prepare(`${DELIVERY_SELECT} WHERE c.id = ? AND ${visibleEvent('ev.')}`)
    .bind(conversationId)
    .first<DeliveryRow>();
  return row ? ((await completeDeliveryRows(env, [row]))[0] ?? null) : null;
}
