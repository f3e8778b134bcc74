/**
 * GET /databases: how full the workspace's D1 database is, for an operator's eye (the dashboard's
 * "Gateways" page). One batch of two counting statements; the size is what D1 reports after them.
 * A count walks the smallest index of its table: a few hundred milliseconds at a million emails.
 */
import { Hono } from 'hono';
import type { AppEnv, Env } from '../env.ts';
import type { Databases } from '../schemas/databases.ts';

/** Cloudflare's limit for one D1 database. */
export const DATABASE_LIMIT_BYTES = 10_000_000_000;

export async function listDatabases(env: Env): Promise<Databases> {
  const db = env.DB;
  const [emails, accounts] = await db.batch<{ n: number }>([
    db.prepare('SELECT COUNT(*) AS n FROM emails'),
    db.prepare('SELECT COUNT(*) AS n FROM accounts WHERE removed_at_ms IS NULL'),
  ]);
  return {
    object: 'Databases',
    data: [
      {
        object: 'Database',
        binding: 'DB',
        size_bytes: accounts!.meta.size_after ?? 0,
        limit_bytes: DATABASE_LIMIT_BYTES,
        emails: emails!.results[0]?.n ?? 0,
        accounts: accounts!.results[0]?.n ?? 0,
      },
    ],
  };
}

export const databases = new Hono<AppEnv>().get('/', async (c) => c.json(await listDatabases(c.env)));
