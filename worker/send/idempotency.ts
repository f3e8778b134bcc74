/**
 * Idempotency-Key for POST /emails and POST /drafts (table `idempotency_keys`). The first request
 * with a key claims it atomically (INSERT … ON CONFLICT DO UPDATE … WHERE expired); a repeat within
 * 24 h gets the first result, one arriving while the first is still running gets 409, and a
 * failure releases the key so the client can try again. The key is bound to the request: its
 * validated body is hashed, and the same key with another body is a 422.
 *
 * A send whose outcome is unknown (the gateway had it, no answer came) keeps its claim as
 * `unresolved`: repeats get 409 until the outcome is known from the gateway's late report or from
 * the synced copy (its Message-ID was fixed before sending), then the first result; a reported
 * failure releases the key. Nothing is sent again to find out.
 */
import type { Context } from 'hono';
import type { AppEnv } from '../env.ts';
import { sha256Hex } from '../../common/crypto.ts';
import { ApiError, OutcomeUnknown, errorBody, invalid } from '../lib/errors.ts';
import { forgetOutgoing } from './outgoing.ts';

export const IDEMPOTENCY_HEADER = 'Idempotency-Key';
const TTL_MS = 24 * 60 * 60 * 1000;
/** A claim still "in progress" after this long belongs to a request that died: it may be taken over. */
const ABANDONED_MS = 10 * 60 * 1000;
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

/** Runs `work` once per key and scope; without the header, just runs it. */
export async function idempotent<T extends object>(
  c: Context<AppEnv>,
  scope: string,
  validatedBody: unknown,
  work: () => Promise<T>,
): Promise<Response> {
  const key = c.req.header(IDEMPOTENCY_HEADER);
  if (key === undefined) return c.json(await work());
  if (key.length === 0 || key.length > 255) throw invalid(`${IDEMPOTENCY_HEADER}: must be 1 to 255 characters`);

  const db = c.env.DB;
  const hash = await requestHash(validatedBody);
  const now = Date.now();
  const claim = await db
    .prepare(
      `INSERT INTO idempotency_keys (key, scope, request_hash, status, created_at, expires_at) VALUES (?, ?, ?, 'in_progress', ?, ?)
       ON CONFLICT (scope, key) DO UPDATE SET request_hash = excluded.request_hash, status = 'in_progress', response_code = NULL, response_json = NULL,
         created_at = excluded.created_at, expires_at = excluded.expires_at
       WHERE idempotency_keys.expires_at <= ? OR (idempotency_keys.status = 'in_progress' AND idempotency_keys.created_at <= ?)`,
    )
    .bind(key, scope, hash, now, now + TTL_MS, now, now - ABANDONED_MS)
    .run();
  if (claim.meta.changes === 0) {
    const row = await db
      .prepare(
        `SELECT request_hash, status, response_code, response_json, account_id, message_id, pending_json, created_at
         FROM idempotency_keys WHERE scope = ? AND key = ?`,
      )
      .bind(scope, key)
      .first<KeyRow>();
    if (row && row.request_hash !== hash) {
      throw new ApiError(
        'idempotency_key_reused',
        `${IDEMPOTENCY_HEADER}: this key was used within 24 h for a request with another body; use a new key for a new request.`,
      );
    }
    if (row?.status === 'unresolved' && (await resolveUnresolved(db, scope, key, row)) === 'released')
      return idempotent(c, scope, validatedBody, work);
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
        : `A request with this ${IDEMPOTENCY_HEADER} is still in progress.`,
    );
  }

  let result: T;
  try {
    result = await work();
  } catch (err) {
    if (err instanceof SendUnresolved) {
      await db
        .prepare(
          `UPDATE idempotency_keys SET status = 'unresolved', account_id = ?, message_id = ?, pending_json = ?
           WHERE scope = ? AND key = ? AND status = 'in_progress'`,
        )
        .bind(err.accountId, err.messageId, JSON.stringify(err.answerIfDone), scope, key)
        .run();
    } else {
      await db
        .prepare("DELETE FROM idempotency_keys WHERE scope = ? AND key = ? AND status = 'in_progress'")
        .bind(scope, key)
        .run();
    }
    throw err;
  }
  const json = JSON.stringify(result);
  await db
    .prepare(
      "UPDATE idempotency_keys SET status = 'completed', response_code = 200, response_json = ? WHERE scope = ? AND key = ?",
    )
    .bind(json, scope, key)
    .run();
  return new Response(json, { status: 200, headers: { 'Content-Type': 'application/json' } });
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
 * Settles an unresolved key if its outcome is known by now: the gateway reported it sent, or its
 * copy synced (completed with the first answer); the gateway reported a failure (the key is
 * released, nothing went out); or it stayed unknown too long (completed with a 502 saying so).
 */
async function resolveUnresolved(
  db: D1Database,
  scope: string,
  key: string,
  row: KeyRow,
): Promise<'completed' | 'released' | 'waiting'> {
  const outgoing = await db
    .prepare(
      `SELECT o.outcome, EXISTS (SELECT 1 FROM emails e WHERE e.account_id = o.account_id AND e.message_id = o.message_id) AS synced
       FROM outgoing_messages o WHERE o.account_id = ? AND o.message_id = ?`,
    )
    .bind(row.account_id, row.message_id)
    .first<{ outcome: string; synced: number }>();
  const complete = (code: number, json: string) =>
    db
      .prepare(
        "UPDATE idempotency_keys SET status = 'completed', response_code = ?, response_json = ? WHERE scope = ? AND key = ? AND status = 'unresolved'",
      )
      .bind(code, json, scope, key)
      .run();
  if (outgoing && (outgoing.outcome === 'sent' || outgoing.synced) && row.pending_json) {
    await complete(200, row.pending_json);
    return 'completed';
  }
  if (outgoing?.outcome === 'failed' && row.account_id && row.message_id) {
    await db
      .prepare("DELETE FROM idempotency_keys WHERE scope = ? AND key = ? AND status = 'unresolved'")
      .bind(scope, key)
      .run();
    await forgetOutgoing(db, row.account_id, row.message_id);
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
