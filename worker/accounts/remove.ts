/**
 * Removing an account: it leaves the API at once (`removed_at_ms`, see removed.ts), its sync stops,
 * and its object purges its data in bounded steps, then deletes the row with account.remove
 * (purge.ts, durable/account-object.ts). The mail on the server is not touched.
 */
import { accountObject } from '../durable/account-stub.ts';
import type { Env } from '../env.ts';
import { notifyGateway } from '../gateways/registry.ts';
import { isoNow } from '../lib/time.ts';
import { accountShard, DIRECTORY_SHARD } from '../shards/registry.ts';

export async function removeAccount(env: Env, accountId: string): Promise<void> {
  // The account's mark in its shard first: lists over every shard hide its mail from then on.
  await markShardRemoved(env, accountId);
  await env.DB.prepare('UPDATE accounts SET removed_at_ms = ?, updated_at = ? WHERE id = ?')
    .bind(Date.now(), isoNow(), accountId)
    .run();
  const holder = await accountObject(env, accountId).remove();
  if (holder) await notifyGateway(env, holder, { op: 'release', account_id: accountId });
}

/** Marks the account removed in its shard (its row there is the mark the shard's reads consult). */
export async function markShardRemoved(env: Env, accountId: string): Promise<void> {
  const shard = await accountShard(env, accountId);
  if (shard.name === DIRECTORY_SHARD) return;
  await shard.db
    .prepare('UPDATE accounts SET removed_at_ms = ? WHERE id = ? AND removed_at_ms IS NULL')
    .bind(Date.now(), accountId)
    .run();
}

/** A purge that should have finished by now is started again (its object lost the alarm, or failed). */
const STALLED_AFTER_MS = 10 * 60 * 1000;

/** From the minute sweep: restarts stalled purges, a few per run (index accounts_removed). */
export async function resumeStalledPurges(env: Env): Promise<void> {
  const { results } = await env.DB.prepare(
    'SELECT id FROM accounts WHERE removed_at_ms IS NOT NULL AND removed_at_ms < ? LIMIT 10',
  )
    .bind(Date.now() - STALLED_AFTER_MS)
    .all<{ id: string }>();
  for (const { id } of results) {
    await markShardRemoved(env, id);
    await accountObject(env, id).remove();
  }
}
