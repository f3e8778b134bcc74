/**
 * GET /databases: how full each of the workspace's D1 databases is — DB (the directory and the first
 * mail shard) and every further mail shard (shards/registry.ts) — for an operator's eye (the
 * dashboard's "Gateways" page). One batch of two counting statements per database; the size is what
 * D1 reports after them. A count walks the smallest index of its table: a few hundred milliseconds
 * at a million emails.
 */
import { Hono } from 'hono';
import type { AppEnv, Env } from '../env.ts';
import type { Database, Databases } from '../schemas/databases.ts';
import { shards, type Shard } from '../shards/registry.ts';

/** Cloudflare's limit for one D1 database. */
export const DATABASE_LIMIT_BYTES = 10_000_000_000;

/**
 * The accounts whose mail a database holds: in DB the directory's rows without a shard, in another
 * shard the rows marking its accounts (both carry `shard` = the database's binding, or NULL in DB).
 */
const HELD_ACCOUNTS = 'SELECT COUNT(*) AS n FROM accounts WHERE removed_at_ms IS NULL AND (shard IS NULL OR shard = ?)';

async function describe({ name, db }: Shard): Promise<Database> {
  const [emails, accounts] = await db.batch<{ n: number }>([
    db.prepare('SELECT COUNT(*) AS n FROM emails'),
    db.prepare(HELD_ACCOUNTS).bind(name),
  ]);
  return {
    object: 'Database',
    binding: name,
    size_bytes: accounts!.meta.size_after ?? 0,
    limit_bytes: DATABASE_LIMIT_BYTES,
    emails: emails!.results[0]?.n ?? 0,
    accounts: accounts!.results[0]?.n ?? 0,
  };
}

export async function listDatabases(env: Env): Promise<Databases> {
  return { object: 'Databases', data: await Promise.all(shards(env).map(describe)) };
}

export const databases = new Hono<AppEnv>().get('/', async (c) => c.json(await listDatabases(c.env)));
