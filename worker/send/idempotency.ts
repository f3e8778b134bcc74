/**
 * Idempotency-Key for POST /emails and POST /drafts (table `idempotency_keys`). The first request
 * with a key claims it atomically (INSERT … ON CONFLICT DO UPDATE … WHERE expired); a repeat within
 * 24 h gets the first result, one arriving while the first is still running gets 409, and a
 * failure releases the key so the client can try again. The key is bound to the request: its
 * validated body is hashed, and the same key with another body is refused rather than answered
 * with the first request's result.
 */
import type { Context } from 'hono';
import type { AppEnv } from '../env.ts';
import { sha256Hex } from '../../common/crypto.ts';
import { ApiError, invalid } from '../lib/errors.ts';

export const IDEMPOTENCY_HEADER = 'Idempotency-Key';
const TTL_MS = 24 * 60 * 60 * 1000;
/** A claim still "in progress" after this long belongs to a request that died: it may be taken over. */
const ABANDONED_MS = 10 * 60 * 1000;

interface KeyRow {
  request_hash: string;
  status: string;
  response_code: number | null;
  response_json: string | null;
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
        'SELECT request_hash, status, response_code, response_json FROM idempotency_keys WHERE scope = ? AND key = ?',
      )
      .bind(scope, key)
      .first<KeyRow>();
    if (row && row.request_hash !== hash) {
      throw invalid(`${IDEMPOTENCY_HEADER}: already used within 24 h for a request with another body`);
    }
    if (row?.status === 'completed' && row.response_json) {
      return new Response(row.response_json, {
        status: row.response_code ?? 200,
        headers: { 'Content-Type': 'application/json', 'Idempotent-Replayed': 'true' },
      });
    }
    throw new ApiError('already_exists', `A request with this ${IDEMPOTENCY_HEADER} is still in progress.`);
  }

  let result: T;
  try {
    result = await work();
  } catch (err) {
    await db
      .prepare("DELETE FROM idempotency_keys WHERE scope = ? AND key = ? AND status = 'in_progress'")
      .bind(scope, key)
      .run();
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
