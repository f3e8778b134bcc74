/**
 * Running reads over shards: one account's (in its shard), a set of rows' (grouped by the shard of
 * their accounts), or every account's (on every shard, merged). With one shard each is exactly the
 * single query it always was.
 */
import type { Env } from '../env.ts';
import { accountShard, shardEnv, shards, type Shard } from './registry.ts';

/** env with DB the shard holding `accountId`'s mail. */
export async function accountEnv(env: Env, accountId: string): Promise<Env> {
  return shardEnv(env, await accountShard(env, accountId));
}

/** `work` on every shard (env's DB that shard), its answers in shard order. */
export function onEveryShard<T>(env: Env, work: (env: Env, shard: Shard) => Promise<T>): Promise<T[]> {
  return Promise.all(shards(env).map((shard) => work(shardEnv(env, shard), shard)));
}

/** The first answer that is not null, asking the shards one after another (an id's row lives in one). */
export async function findInShards<T>(env: Env, find: (env: Env) => Promise<T | null>): Promise<T | null> {
  for (const shard of shards(env)) {
    const found = await find(shardEnv(env, shard));
    if (found !== null) return found;
  }
  return null;
}

/** Rows grouped by the shard of their account, each group with env pointing at its shard (in shard order). */
export async function groupByShard<R extends { account_id: string }>(
  env: Env,
  rows: R[],
): Promise<{ env: Env; rows: R[] }[]> {
  const groups = new Map<string, { env: Env; rows: R[] }>();
  const order = shards(env).map((s) => s.name);
  for (const row of rows) {
    const shard = await accountShard(env, row.account_id);
    const group = groups.get(shard.name) ?? { env: shardEnv(env, shard), rows: [] };
    groups.set(shard.name, group);
    group.rows.push(row);
  }
  return [...groups.entries()].sort(([a], [b]) => order.indexOf(a) - order.indexOf(b)).map(([, g]) => g);
}

/**
 * `work` where the rows of a list may be: the shard of `accountId` when the list is one account's
 * (a malformed id, null, finds nothing anywhere: DB is asked), else every shard.
 */
export async function onListShards<T>(
  env: Env,
  accountId: string | null | undefined,
  work: (env: Env) => Promise<T>,
): Promise<T[]> {
  if (accountId === undefined) return onEveryShard(env, work);
  return [await work(accountId === null ? shardEnv(env, shards(env)[0]!) : await accountEnv(env, accountId))];
}

type Key = (string | number)[];

/** Compares order keys column by column; `descending[i]` reverses column i. */
export const keyOrder =
  <R>(key: (row: R) => Key, descending: boolean[]) =>
  (a: R, b: R): number => {
    const x = key(a);
    const y = key(b);
    for (let i = 0; i < x.length; i++) {
      if (x[i] !== y[i]) return (x[i]! < y[i]! ? -1 : 1) * (descending[i] ? -1 : 1);
    }
    return 0;
  };

/**
 * Keyset pages of the same query from every shard, merged: each shard returned its first
 * `limit + 1` rows after the cursor in the list's order (a total order, unique per row), so the
 * first `limit + 1` of the union are the list's. `key` gives a row's order key; `descending` for
 * lists with mixed directions (`keyOrder`). The cursor stays the position of the last row: one
 * position serves every shard.
 */
export function mergePages<R>(pages: R[][], limit: number, order: (a: R, b: R) => number): R[] {
  if (pages.length === 1) return pages[0]!;
  return pages
    .flat()
    .sort(order)
    .slice(0, limit + 1);
}
