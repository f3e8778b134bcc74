/**
 * Removing an account: it leaves the API at once (`removed_at_ms`, see removed.ts), its sync stops,
 * and its object purges its data in bounded steps, then deletes the row with account.remove
 * (purge.ts, durable/account-object.ts). The mail on the server is not touched.
 */
import { accountObject } from '../durable/account-stub.ts';
import type { Env } from '../env.ts';
import { notifyGateway } from '../gateways/registry.ts';
import { isoNow } from '../lib/time.ts';

export async function removeAccount(env: Env, accountId: string): Promise<void> {
  await env.DB.prepare('UPDATE accounts SET removed_at_ms = ?, updated_at = ? WHERE id = ?')
    .bind(Date.now(), isoNow(), accountId)
    .run();
  const holder = await accountObject(env, accountId).remove();
  if (holder) await notifyGateway(env, holder, { op: 'release', account_id: accountId });
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
  for (const { id } of results) await accountObject(env, id).remove();
}
