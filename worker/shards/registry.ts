/**
 * Mail shards: the D1 databases that hold accounts' mail (docs/capacity.md). `DB` is always the
 * first shard and the only home of the workspace's directory (accounts, API keys, webhook
 * endpoints, gateways, idempotency records, events of no account). Each further `[[d1_databases]]`
 * binding named `MAIL_DB_2`, `MAIL_DB_3`, … (same migrations_dir) is one more shard. An account's
 * shard is chosen once, when it is connected, and named in `accounts.shard` (the binding's name,
 * NULL for DB), so adding a shard never moves an account. One account's mail — emails, folders,
 * contacts, threads, its events and their delivery log, outgoing and scheduled sends — lives in its
 * shard only; reads over every account ask every shard and merge (shards/merge.ts).
 */
import type { Env } from '../env.ts';

/** The binding every workspace has: the directory, and the first shard. */
export const DIRECTORY_SHARD = 'DB';

const EXTRA_SHARD = /^MAIL_DB_([0-9]+)$/;

export interface Shard {
  /** The binding's name, as stored in `accounts.shard` (`DB` stored as NULL). */
  name: string;
  db: D1Database;
}

/** The directory database, also from an account's view of env. */
export const directoryDb = (env: Env): D1Database => env.DIRECTORY ?? env.DB;

/** Every shard of `env`: DB first, then MAIL_DB_2, MAIL_DB_3, … by number. */
export function shards(env: Env): Shard[] {
  const bindings = env as unknown as Record<string, unknown>;
  const extra = Object.keys(bindings)
    .map((name) => ({ name, match: EXTRA_SHARD.exec(name) }))
    .filter((s) => s.match !== null && bindings[s.name] !== undefined)
    .sort((a, b) => Number(a.match![1]) - Number(b.match![1]))
    .map(({ name }) => ({ name, db: bindings[name] as D1Database }));
  return [{ name: DIRECTORY_SHARD, db: directoryDb(env) }, ...extra];
}

/** Whether the workspace has more than one shard (with one, no lookup is ever needed). */
export const isSharded = (env: Env): boolean => shards(env).length > 1;

/** The shard named `name` (NULL: DB); a name no binding has any more is an operator's error. */
export function shardByName(env: Env, name: string | null | undefined): Shard {
  if (!name || name === DIRECTORY_SHARD) return { name: DIRECTORY_SHARD, db: directoryDb(env) };
  const db = (env as unknown as Record<string, unknown>)[name] as D1Database | undefined;
  if (!db) throw new Error(`shard ${name} has no D1 binding: keep every MAIL_DB_n binding in wrangler.toml`);
  return { name, db };
}

/** Account id → shard name: an account's shard never changes, so a resolution is kept for the isolate's life. */
const resolved = new Map<string, string>();
const RESOLVED_MAX = 10_000;

/**
 * The shard holding `accountId`'s mail. With one shard, DB without a query; otherwise one lookup in
 * the directory per account and isolate. An account the directory does not know (never connected,
 * or purged) resolves to DB, where there is nothing of it either.
 */
export async function accountShard(env: Env, accountId: string): Promise<Shard> {
  if (!isSharded(env)) return { name: DIRECTORY_SHARD, db: directoryDb(env) };
  let name = resolved.get(accountId);
  if (name === undefined) {
    const row = await directoryDb(env)
      .prepare('SELECT shard FROM accounts WHERE id = ?')
      .bind(accountId)
      .first<{ shard: string | null }>();
    if (!row) return { name: DIRECTORY_SHARD, db: directoryDb(env) };
    name = row.shard ?? DIRECTORY_SHARD;
    if (resolved.size >= RESOLVED_MAX) resolved.clear();
    resolved.set(accountId, name);
  }
  return shardByName(env, name);
}

/** The D1 database holding `accountId`'s mail. */
export const mailDb = async (env: Env, accountId: string): Promise<D1Database> =>
  (await accountShard(env, accountId)).db;

/**
 * The shard a new account goes to: the one holding the fewest accounts (removed ones still being
 * purged count), the last of them on a tie (a shard just added is the emptiest, and fills first). The stored value: NULL for DB, else the binding name.
 */
export async function chooseShard(env: Env): Promise<Shard> {
  const all = shards(env);
  if (all.length === 1) return all[0]!;
  const { results } = await directoryDb(env).prepare('SELECT shard, count(*) AS n FROM accounts GROUP BY shard').all<{
    shard: string | null;
    n: number;
  }>();
  const held = new Map(results.map((r) => [r.shard ?? DIRECTORY_SHARD, r.n]));
  let best = all[0]!;
  for (const shard of all) if ((held.get(shard.name) ?? 0) <= (held.get(best.name) ?? 0)) best = shard;
  return best;
}

/**
 * The account's row in a shard other than DB: the mark its mail rows refer to (their foreign keys,
 * and whether it is being removed), without settings or credentials. DB's row is the account's own.
 */
export async function markAccountInShard(shard: Shard, accountId: string, nowIso: string): Promise<void> {
  if (storedShardName(shard) === null) return;
  await shard.db
    .prepare(
      `INSERT OR IGNORE INTO accounts (id, email, user_id, imap_host, imap_port, imap_encryption, smtp_host, smtp_port,
         smtp_encryption, smtp_user, credentials, created_at, updated_at, shard)
       VALUES (?1, ?1, '', '', 0, '', '', 0, '', '', '', ?2, ?2, ?3)`,
    )
    .bind(accountId, nowIso, shard.name)
    .run();
}

/** The `shard` field of a queue message about rows in env.DB's shard: none for DB. */
export const shardTag = (env: Env): { shard?: string } => {
  const shard = currentShard(env);
  return shard.name === DIRECTORY_SHARD ? {} : { shard: shard.name };
};

/** `accounts.shard` as stored for `shard`. */
export const storedShardName = (shard: Shard): string | null => (shard.name === DIRECTORY_SHARD ? null : shard.name);

/**
 * Makes `view` (a copy of env handed to an account's code) the account's view: its DB becomes the
 * account's shard, DIRECTORY the directory. Mail code then writes `env.DB` as it always did, and
 * code touching the directory (accounts, idempotency records) uses `directoryDb(env)`. With one
 * shard the view stays env as it is.
 */
export function bindAccountShard(view: Env, shard: Shard): void {
  if (shard.name === DIRECTORY_SHARD) return;
  Object.assign(view, { DIRECTORY: directoryDb(view), DB: shard.db, SHARD_NAME: shard.name });
}

/** The shard `env.DB` stands for (DB, unless env is an account's view). */
export const currentShard = (env: Env): Shard => ({ name: env.SHARD_NAME ?? DIRECTORY_SHARD, db: env.DB });

/** env with DB the directory again (for writing the directory's rows and events from an account's view). */
export const directoryEnv = (env: Env): Env =>
  env.DIRECTORY ? { ...env, DB: env.DIRECTORY, DIRECTORY: undefined, SHARD_NAME: undefined } : env;

/** An env whose DB is `shard` (for code written against env.DB, run on one shard). */
export function shardEnv(env: Env, shard: Shard): Env {
  const base = directoryEnv(env);
  if (shard.name === DIRECTORY_SHARD) return base;
  return { ...base, DIRECTORY: base.DB, DB: shard.db, SHARD_NAME: shard.name };
}
