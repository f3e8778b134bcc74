/**
 * Idempotency-Key for POST /emails and POST /drafts (table `idempotency_keys`). The first request
 * with a key claims it atomically (INSERT … ON CONFLICT DO UPDATE … WHERE expired); a repeat within
 * 24 h gets the first result, one arriving while the first is still running gets 409, and a
 * failure releases the key so the client can try again. The key is bound to the request: its
 * validated body is hashed, and the same key with another body is a 422.
 *
 * Each claim carries the id of the request that made it. Before its message is handed to the
 * account's object the request marks the claim with the account and Message-ID (`Claim.handed`);
 * from then on the claim is never taken over, whatever happens to the request (a client that went
 * away, an eviction): repeats get 409 until the outcome is known from the account object's record,
 * the gateway's late report or the synced copy (its Message-ID was fixed before sending), then the
 * first result; a known failure releases the key, and so does a send the account's object never
 * took (its request ended in between: the object fences the Message-ID off, `fencedOff`); 15
 * minutes without an outcome answer "unknown", for good. Nothing is sent again to find out. Only a
 * claim that never got that far (its request died while composing) is taken over once
 * IDEMPOTENCY_ABANDONED_SECONDS have passed.
 */
import type { Context } from 'hono';
import type { AppEnv, Env } from '../env.ts';
import { sha256Hex } from '../../common/crypto.ts';
import { ApiError, OutcomeUnknown, errorBody, invalid, notFound } from '../lib/errors.ts';
import { LIVE_ACCOUNT } from '../accounts/removed.ts';
import { randomToken } from '../lib/crypto.ts';
import { accountObject } from '../durable/account-stub.ts';
import { mailDb } from '../shards/registry.ts';
import { forgetOutgoing } from './outgoing.ts';

export const IDEMPOTENCY_HEADER = 'Idempotency-Key';
const TTL_MS = 24 * 60 * 60 * 1000;
/** Default of IDEMPOTENCY_ABANDONED_SECONDS: a claim never handed on still "in progress" after this long belongs to a request that died. */
const ABANDONED_DEFAULT_S = 10 * 60;

export function abandonedMs(env: Env): number {
  const seconds = Number(env.IDEMPOTENCY_ABANDONED_SECONDS);
  return (Number.isInteger(seconds) && seconds >= 1 && seconds <= 86_400 ? seconds : ABANDONED_DEFAULT_S) * 1000;
}
/** A handed-on send its account's object has not taken this long after its claim: its request ended first. */
const FENCE_AFTER_MS = 60_000;
/** An unknown outcome still unknown after this long is answered as unknown, for good. */
const UNRESOLVED_GIVE_UP_MS = 15 * 60 * 1000;

interface KeyRow {
  request_hash: string;
  status: string;
  response_code: number | null;
  response_json: string | null;
  account_id: string | null;
  message_id: string | null;
  pending_json: string | null;
  created_at: number;
}

/** A send or draft the gateway had but did not answer: the answer it gets if it turns out done. */
export class SendUnresolved extends OutcomeUnknown {
  readonly accountId: string;
  readonly messageId: string;
  readonly answerIfDone: object;

  constructor(accountId: string, messageId: string, answerIfDone: object, reason: string) {
    super(
      `${reason} The message ${messageId} may still go out: do not send it again. A retry with the same ` +
        `${IDEMPOTENCY_HEADER} answers with the outcome once it is known; the copy in Sent shows origin "api".`,
    );
    this.accountId = accountId;
    this.messageId = messageId;
    this.answerIfDone = answerIfDone;
  }
}

/** The hash that binds a key to its request: SHA-256 of the validated body as JSON (fields in schema order). */
export function requestHash(validatedBody: unknown): Promise<string> {
  return sha256Hex(JSON.stringify(validatedBody));
}

/** The request's hold on its key, given to the work. */
export interface Claim {
  /**
   * Marks the claim as handed on (its message may reach a gateway from now on): it is then settled,
   * never taken over. Throws 409 when another request took the claim over meanwhile.
   */
  handed(accountId: string, messageId: string, answerIfDone: object): Promise<void>;
}

const UNCLAIMED: Claim = { handed: async () => undefined };

/** Runs `work` once per key and scope; without the header, just runs it. */
export async function idempotent<T extends object>(
  c: Context<AppEnv>,
  scope: string,
  validatedBody: unknown,
  work: (claim: Claim) => Promise<T>,
  status: 200 | 202 = 200,
): Promise<Response> {
  const key = c.req.header(IDEMPOTENCY_HEADER);
  if (key === undefined) return c.json(await work(UNCLAIMED), status);
  if (key.length === 0 || key.length > 255) throw invalid(`${IDEMPOTENCY_HEADER}: must be 1 to 255 characters`);

  const db = c.env.DB;
  const hash = await requestHash(validatedBody);
  const now = Date.now();
  const claimId = randomToken('', 20);
  const claim = await db
    .prepare(
      `INSERT INTO idempotency_keys (key, scope, request_hash, status, created_at, expires_at, claim_id) VALUES (?, ?, ?, 'in_progress', ?, ?, ?)
       ON CONFLICT (scope, key) DO UPDATE SET request_hash = excluded.request_hash, status = 'in_progress', response_code = NULL, response_json = NULL,
         created_at = excluded.created_at, expires_at = excluded.expires_at, claim_id = excluded.claim_id,
         account_id = NULL, message_id = NULL, pending_json = NULL
       WHERE idempotency_keys.expires_at <= ?
         OR (idempotency_keys.status = 'in_progress' AND idempotency_keys.message_id IS NULL AND idempotency_keys.created_at <= ?)`,
    )
    .bind(key, scope, hash, now, now + TTL_MS, claimId, now, now - abandonedMs(c.env))
    .run();
  if (claim.meta.changes === 0) {
    // Taken by another request: its answer, or the key freed again (then this request claims it).
    const taken = await answerOfTakenKey(c.env, scope, key, hash);
    return taken === 'released' ? idempotent(c, scope, validatedBody, work, status) : taken;
  }

  const mine = 'scope = ? AND key = ? AND claim_id = ?';
  const handed: Claim['handed'] = async (accountId, messageId, answerIfDone) => {
    const marked = await db
      .prepare(
        `UPDATE idempotency_keys SET account_id = ?, message_id = ?, pending_json = ? WHERE ${mine} AND status = 'in_progress'`,
      )
      .bind(accountId, messageId, JSON.stringify(answerIfDone), scope, key, claimId)
      .run();
    if (marked.meta.changes === 0)
      throw new ApiError('already_exists', `This request's ${IDEMPOTENCY_HEADER} was taken over by a later request.`);
  };
  let result: T;
  try {
    result = await work({ handed });
  } catch (err) {
    if (err instanceof SendUnresolved) {
      await db
        .prepare(
          `UPDATE idempotency_keys SET status = 'unresolved', account_id = ?, message_id = ?, pending_json = ?
           WHERE ${mine} AND status = 'in_progress'`,
        )
        .bind(err.accountId, err.messageId, JSON.stringify(err.answerIfDone), scope, key, claimId)
        .run();
    } else {
      await db
        .prepare(`DELETE FROM idempotency_keys WHERE ${mine} AND status = 'in_progress'`)
        .bind(scope, key, claimId)
        .run();
    }
    throw err;
  }
  const json = JSON.stringify(result);
  await db
    .prepare(`UPDATE idempotency_keys SET status = 'completed', response_code = ?, response_json = ? WHERE ${mine}`)
    .bind(status, json, scope, key, claimId)
    .run();
  return new Response(json, { status, headers: { 'Content-Type': 'application/json' } });
}

/**
 * A key another request holds or held: its stored answer replayed, 409 while its outcome is not
 * known, or 'released' when its send turned out to have sent nothing (the key is free again).
 */
async function answerOfTakenKey(env: Env, scope: string, key: string, hash: string): Promise<Response | 'released'> {
  const db = env.DB;
  const row = await db
    .prepare(
      `SELECT request_hash, status, response_code, response_json, account_id, message_id, pending_json, created_at,
         ${LIVE_ACCOUNT('account_id')} AS account_live
       FROM idempotency_keys WHERE scope = ? AND key = ?`,
    )
    .bind(scope, key)
    .first<KeyRow & { account_live: number }>();
  // A removed account's answers are not replayed: it is unknown from the moment it is removed.
  if (row?.account_id && !row.account_live) throw notFound('Account');
  if (row && row.request_hash !== hash) {
    throw new ApiError(
      'idempotency_key_reused',
      `${IDEMPOTENCY_HEADER}: this key was used within 24 h for a request with another body; use a new key for a new request.`,
    );
  }
  const handedOn = row?.message_id && (row.status === 'unresolved' || row.status === 'in_progress');
  if (handedOn && (await resolveUnresolved(env, scope, key, row)) === 'released') return 'released';
  const done = row?.status === 'completed' ? row : await completedRow(db, scope, key);
  if (done?.response_json) {
    return new Response(done.response_json, {
      status: done.response_code ?? 200,
      headers: { 'Content-Type': 'application/json', 'Idempotent-Replayed': 'true' },
    });
  }
  throw new ApiError(
    'already_exists',
    row?.status === 'unresolved'
      ? `The send made with this ${IDEMPOTENCY_HEADER} has an unknown outcome so far; it will not be sent again. Retry later for its result.`
      : handedOn
        ? `The send made with this ${IDEMPOTENCY_HEADER} is on its way; it will not be sent again. Retry later for its result.`
        : `A request with this ${IDEMPOTENCY_HEADER} is still in progress.`,
  );
}

async function completedRow(db: D1Database, scope: string, key: string) {
  return db
    .prepare(
      "SELECT response_code, response_json FROM idempotency_keys WHERE scope = ? AND key = ? AND status = 'completed'",
    )
    .bind(scope, key)
    .first<Pick<KeyRow, 'response_code' | 'response_json'>>();
}

/**
 * Settles a key handed on (in progress or unresolved) if its outcome is known by now: the account's
 * object or the gateway recorded it sent, or its copy synced (completed with the first answer); a
 * failure was recorded (the key is released, nothing went out); or it stayed unknown too long
 * (completed with a 502 saying so).
 */
async function resolveUnresolved(
  env: Env,
  scope: string,
  key: string,
  row: KeyRow,
): Promise<'completed' | 'released' | 'waiting'> {
  const db = env.DB;
  // The key is the workspace's; what the send left is in the account's mail shard.
  const mail = await mailDb(env, row.account_id!);
  const outgoing = await mail
    .prepare(
      `SELECT o.outcome, EXISTS (SELECT 1 FROM emails e WHERE e.account_id = o.account_id AND e.message_id = o.message_id) AS synced
       FROM outgoing_messages o WHERE o.account_id = ? AND o.message_id = ?`,
    )
    .bind(row.account_id, row.message_id)
    .first<{ outcome: string; synced: number }>();
  const complete = (code: number, json: string) =>
    db
      .prepare(
        "UPDATE idempotency_keys SET status = 'completed', response_code = ?, response_json = ? WHERE scope = ? AND key = ? AND status IN ('in_progress', 'unresolved')",
      )
      .bind(code, json, scope, key)
      .run();
  const schedule = row.pending_json?.includes('"object":"EmailScheduled"')
    ? await scheduleState(mail, row.account_id!, row.message_id!)
    : null;
  if (schedule === 'listed') {
    await complete(202, row.pending_json!);
    return 'completed';
  }
  if (outgoing && (outgoing.outcome === 'sent' || outgoing.synced) && row.pending_json) {
    await complete(200, row.pending_json);
    return 'completed';
  }
  // A failure, no record at all (a failure forgotten), or a send the account's object never took
  // (its request ended after handing it on, before the object had it): nothing went out.
  const neverTaken = outgoing?.outcome === 'pending' && !schedule && (await fencedOff(env, row));
  if ((!outgoing || outgoing.outcome === 'failed' || neverTaken) && row.account_id && row.message_id) {
    await db
      .prepare("DELETE FROM idempotency_keys WHERE scope = ? AND key = ? AND status IN ('in_progress', 'unresolved')")
      .bind(scope, key)
      .run();
    await forgetOutgoing(mail, row.account_id, row.message_id);
    return 'released';
  }
  if (Date.now() - row.created_at > UNRESOLVED_GIVE_UP_MS) {
    const body = errorBody(
      'provider_error',
      `The outcome of the send of ${row.message_id} could not be established: the gateway stopped answering while it had the message, and no copy has synced. It may have been delivered; check Sent before sending it again with a new ${IDEMPOTENCY_HEADER}.`,
    );
    await complete(body.status, JSON.stringify(body));
    return 'completed';
  }
  return 'waiting';
}

/**
 * Whether the account's object never took this handed-on send, and now never will: asked only once
 * the request that handed it on has had ample time to reach the object.
 */
async function fencedOff(env: Env, row: KeyRow): Promise<boolean> {
  if (Date.now() - row.created_at < FENCE_AFTER_MS) return false;
  const verdict = await accountObject(env, row.account_id!)
    .fenceSend(row.message_id!, row.created_at)
    .catch(() => 'unknown' as const);
  return verdict === 'fenced';
}

/**
 * A key handed on for a scheduled send: 'listed' once its schedule is (the account's object lists
 * only what it will send), else 'unlisted' (the object never took it, or has not yet).
 */
async function scheduleState(db: D1Database, accountId: string, messageId: string): Promise<'listed' | 'unlisted'> {
  const row = await db
    .prepare('SELECT 1 AS found FROM scheduled_emails WHERE account_id = ? AND message_id = ?')
    .bind(accountId, messageId)
    .first<{ found: number }>();
  return row ? 'listed' : 'unlisted';
}
