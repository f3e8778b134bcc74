import { Hono } from 'hono';
import { z } from 'zod';
import type { AppEnv } from '../env.ts';
import type { ApiKey } from '../schemas/accounts.ts';
import { API_KEY_PREFIX, hashApiKey } from '../lib/auth.ts';
import { randomToken } from '../lib/crypto.ts';
import { notFound } from '../lib/errors.ts';
import { newId, parseId } from '../lib/ids.ts';
import { offsetList, offsetPaging } from '../lib/paging.ts';
import { isoNow } from '../lib/time.ts';
import { parseJsonBody, parseQuery } from '../lib/validation.ts';
import { enforceLimit, rateLimited } from '../lib/rate-limits.ts';

interface ApiKeyRow {
  id: string;
  name: string;
  prefix: string;
  role: string;
  issued_at: string;
  last_used_at: string | null;
}

const present = (row: ApiKeyRow): ApiKey => ({
  object: 'ApiKey' as const,
  id: row.id,
  name: row.name,
  prefix: row.prefix,
  role: 'service',
  issued_at: row.issued_at,
  last_used_at: row.last_used_at,
});

export const CreateApiKeyBody = z.strictObject({
  name: z.string().trim().min(1, 'must not be empty').max(100, 'must be at most 100 characters'),
});

/** Characters of the key shown in listings: the type prefix plus a few random ones, never enough to use. */
const SHOWN_PREFIX_LENGTH = API_KEY_PREFIX.length + 6;

/** Live keys at most, unless MAX_API_KEYS says otherwise: each key has its own request budget. */
const DEFAULT_MAX_API_KEYS = 100;

export function maxApiKeys(env: { MAX_API_KEYS?: string }): number {
  const configured = Number(env.MAX_API_KEYS);
  return Number.isSafeInteger(configured) && configured > 0 ? configured : DEFAULT_MAX_API_KEYS;
}

export const apiKeys = new Hono<AppEnv>()
  .post('/', async (c) => {
    const { name } = await parseJsonBody(c, CreateApiKeyBody);
    const key = randomToken(API_KEY_PREFIX, 30);
    const row: ApiKeyRow = {
      id: newId('apiKey'),
      name,
      prefix: key.slice(0, SHOWN_PREFIX_LENGTH),
      role: 'service',
      issued_at: isoNow(),
      last_used_at: null,
    };
    await enforceLimit(c.env.KEY_CREATION_RATE_LIMIT, 'workspace', 'Too many API keys created lately.');
    const max = maxApiKeys(c.env);
    // The count and the insert in one statement, so concurrent creations cannot pass the cap together.
    const { meta } = await c.env.DB.prepare(
      `INSERT INTO api_keys (id, name, prefix, key_hash, role, issued_at)
       SELECT ?, ?, ?, ?, ?, ? WHERE (SELECT COUNT(*) FROM api_keys WHERE revoked_at IS NULL) < ?`,
    )
      .bind(row.id, row.name, row.prefix, await hashApiKey(key), row.role, row.issued_at, max)
      .run();
    if (meta.changes === 0)
      throw rateLimited(`This workspace has ${max} live API keys, the most allowed; revoke one first.`);
    return c.json({ ...present(row), key });
  })
  .get('/', async (c) => {
    const { limit, offset } = parseQuery(c, offsetPaging);
    const { results } = await c.env.DB.prepare(
      `SELECT id, name, prefix, role, issued_at, last_used_at FROM api_keys
       WHERE revoked_at IS NULL ORDER BY issued_at DESC, id DESC LIMIT ? OFFSET ?`,
    )
      .bind(limit + 1, offset)
      .all<ApiKeyRow>();
    return c.json(offsetList('ApiKeys', results.map(present), limit));
  })
  .delete('/:id', async (c) => {
    const id = parseId('apiKey', c.req.param('id'));
    if (!id) throw notFound('API key');
    const { meta } = await c.env.DB.prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL')
      .bind(isoNow(), id)
      .run();
    if (meta.changes === 0) throw notFound('API key');
    return c.json({ object: 'ApiKeyDeleted', id });
  });
