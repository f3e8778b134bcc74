/**
 * API key authentication: X-API-KEY (the MCP endpoint, worker/mcp/, also takes a bearer token).
 * Keys are stored only as SHA-256 hashes and compared in constant time; the ADMIN_API_KEY secret is
 * accepted too (that is how the first key is made). `last_used_at` is written at most once a minute
 * per key, in the background, never on the request's path. Each key (not the admin key, the
 * operator's own) is rate limited by the API_RATE_LIMIT binding.
 */
import type { Context, MiddlewareHandler, Next } from 'hono';
import type { AppEnv } from '../env.ts';
import { ApiError } from './errors.ts';
import { constantTimeEqual, sha256Hex } from '../../common/crypto.ts';
import { isoNow } from './time.ts';

const LAST_USED_RESOLUTION_MS = 60_000;
/** The window of the API_RATE_LIMIT binding (wrangler.toml): the longest a limited client waits. */
const RATE_LIMIT_PERIOD_SECONDS = 60;

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
  if (!presented) throw new ApiError('unauthorized', missing, unauthorizedHeaders);

  const admin = c.env.ADMIN_API_KEY;
  if (admin && (await constantTimeEqual(presented, admin))) {
    c.set('apiKeyId', 'admin');
    return next();
  }

  const hash = await hashApiKey(presented);
  const row = await c.env.DB.prepare(
    'SELECT id, key_hash, last_used_at FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL',
  )
    .bind(hash)
    .first<{ id: string; key_hash: string; last_used_at: string | null }>();
  if (!row || !(await constantTimeEqual(row.key_hash, hash))) {
    throw new ApiError('unauthorized', 'The API key is not valid or has been revoked.', unauthorizedHeaders);
  }
  c.set('apiKeyId', row.id);

  if (c.env.API_RATE_LIMIT && !(await c.env.API_RATE_LIMIT.limit({ key: row.id })).success) {
    throw new ApiError(
      'rate_limited',
      'Too many requests with this API key; slow down and retry after the time in Retry-After.',
      {
        'Retry-After': String(RATE_LIMIT_PERIOD_SECONDS),
      },
    );
  }

  const lastUsed = row.last_used_at ? Date.parse(row.last_used_at) : 0;
  if (Date.now() - lastUsed > LAST_USED_RESOLUTION_MS) {
    c.executionCtx.waitUntil(
      c.env.DB.prepare('UPDATE api_keys SET last_used_at = ? WHERE id = ?').bind(isoNow(), row.id).run(),
    );
  }
  return next();
}
