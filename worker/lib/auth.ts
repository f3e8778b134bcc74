/**
 * API key authentication: X-API-KEY (the MCP endpoint, worker/mcp/, also takes a bearer token).
 * Keys are stored only as SHA-256 hashes and compared in constant time; the ADMIN_API_KEY secret is
 * accepted too (that is how the first key is made). `last_used_at` is written at most once a minute
 * per key, in the background, never on the request's path.
 *
 * Limits (lib/rate-limits.ts), in this order: a request whose key is not known valid spends a token
 * of its client address's budget (ADDRESS_RATE_LIMIT) before the key is looked up in D1, so a flood
 * of wrong keys is refused without touching storage. A valid key then spends one of its own
 * (API_RATE_LIMIT) and one of the workspace's (WORKSPACE_RATE_LIMIT). The admin key, the
 * operator's own, is not limited.
 */
import type { Context, MiddlewareHandler, Next } from 'hono';
import type { AppEnv } from '../env.ts';
import { ApiError } from './errors.ts';
import { constantTimeEqual, sha256Hex } from '../../common/crypto.ts';
import { clientAddress, enforceLimit } from './rate-limits.ts';
import { isoNow } from './time.ts';

const LAST_USED_RESOLUTION_MS = 60_000;

/**
 * Hashes of keys this isolate found valid lately, so that their requests do not spend the address
 * budget meant for wrong keys. Only that: every request's key is still looked up in D1 (a revoked
 * key stops at once), and a key not seen here yet spends one address token per isolate and minute.
 */
const recentlyValid = new Map<string, number>();
const RECENTLY_VALID_MS = 60_000;
const RECENTLY_VALID_MAX = 1000;

function knownValid(hash: string, now: number): boolean {
  const until = recentlyValid.get(hash);
  return until !== undefined && until > now;
}

function rememberValid(hash: string, now: number): void {
  recentlyValid.delete(hash);
  if (recentlyValid.size >= RECENTLY_VALID_MAX) recentlyValid.delete(recentlyValid.keys().next().value as string);
  recentlyValid.set(hash, now + RECENTLY_VALID_MS);
}

export const API_KEY_PREFIX = 'mbx_';

export const hashApiKey = (key: string): Promise<string> => sha256Hex(key);

/** The REST API: the key in X-API-KEY. */
export const requireApiKey: MiddlewareHandler<AppEnv> = (c, next) =>
  authenticateApiKey(c, c.req.header('X-API-KEY'), 'The X-API-KEY header is missing.', next);

/**
 * Checks the key a request presents (`missing`: the 401 detail when there is none); sets `apiKeyId`
 * and runs `next` when it is valid. `unauthorizedHeaders` go on the 401 answers.
 */
export async function authenticateApiKey(
  c: Context<AppEnv>,
  presented: string | undefined,
  missing: string,
  next: Next,
  unauthorizedHeaders: Record<string, string> = {},
) {
  const admin = c.env.ADMIN_API_KEY;
  if (presented && admin && (await constantTimeEqual(presented, admin))) {
    c.set('apiKeyId', 'admin');
    return next();
  }

  const hash = presented ? await hashApiKey(presented) : '';
  const now = Date.now();
  if (!presented || !knownValid(hash, now))
    await enforceLimit(
      c.env.ADDRESS_RATE_LIMIT,
      clientAddress(c),
      'Too many requests without a valid API key from this address.',
    );
  if (!presented) throw new ApiError('unauthorized', missing, unauthorizedHeaders);

  const row = await c.env.DB.prepare(
    'SELECT id, key_hash, last_used_at FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL',
  )
    .bind(hash)
    .first<{ id: string; key_hash: string; last_used_at: string | null }>();
  if (!row || !(await constantTimeEqual(row.key_hash, hash))) {
    recentlyValid.delete(hash);
    throw new ApiError('unauthorized', 'The API key is not valid or has been revoked.', unauthorizedHeaders);
  }
  rememberValid(hash, now);
  c.set('apiKeyId', row.id);

  await enforceLimit(c.env.API_RATE_LIMIT, row.id, 'Too many requests with this API key; slow down.');
  await enforceLimit(c.env.WORKSPACE_RATE_LIMIT, 'workspace', 'Too many requests in this workspace; slow down.');

  const lastUsed = row.last_used_at ? Date.parse(row.last_used_at) : 0;
  if (now - lastUsed > LAST_USED_RESOLUTION_MS) {
    c.executionCtx.waitUntil(
      c.env.DB.prepare('UPDATE api_keys SET last_used_at = ? WHERE id = ?').bind(isoNow(), row.id).run(),
    );
  }
  return next();
}
