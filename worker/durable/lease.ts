/**
 * Leases: which gateway holds an account. The account's object says who the holder is and refuses
 * changes from anyone else; D1 names the holder too (`accounts.gateway_id`), and the lease is held
 * while that gateway heartbeats: its one row in `gateways` (`last_seen_ms`) is fresher than a lease
 * time. So a heartbeat keeps all of a gateway's leases by refreshing that one row, and an idle
 * account costs no D1 write of its own. A lease changes hands only through `claimLease` (a
 * compare-and-set in D1), run by the object; a holder whose heartbeat ran out loses its accounts one
 * claim at a time, and is refused by the object from then on, as any other former holder.
 */
import type { Env } from '../env.ts';
import { directoryDb } from '../shards/registry.ts';

export interface Lease {
  gateway_id: string;
}

/** How long a lease lasts without a heartbeat, unless GATEWAY_LEASE_TTL_SECONDS says otherwise. */
export const LEASE_TTL_MS = 60_000;

/** GATEWAY_LEASE_TTL_SECONDS (5–3600), else LEASE_TTL_MS. */
export function leaseTtlMs(env: Env): number {
  const seconds = Number(env.GATEWAY_LEASE_TTL_SECONDS);
  return Number.isInteger(seconds) && seconds >= 5 && seconds <= 3600 ? seconds * 1000 : LEASE_TTL_MS;
}

/** Gateways whose last heartbeat is after this are live, and hold their leases (`gateways.last_seen_ms`). */
export function liveSince(env: Env, now = Date.now()): number {
  return now - leaseTtlMs(env);
}

/**
 * Gives the account to `gatewayId` in D1 if nobody holds it, the holder's heartbeat ran out, or the
 * caller holds it already; with `instance`, only while that process owns the gateway id. Returns who
 * holds it afterwards (null: the account is gone or removed).
 */
export async function claimLease(
  env: Env,
  accountId: string,
  gatewayId: string,
  instance: string | undefined,
): Promise<{ granted: boolean; holder: string | null }> {
  const owner = instance === undefined ? '' : 'AND EXISTS (SELECT 1 FROM gateways WHERE id = ?1 AND instance = ?4)';
  const granted = await directoryDb(env)
    .prepare(
      `UPDATE accounts SET gateway_id = ?1
     WHERE id = ?2 AND removed_at_ms IS NULL
       AND (gateway_id IS NULL OR gateway_id = ?1
         OR NOT EXISTS (SELECT 1 FROM gateways WHERE id = accounts.gateway_id AND last_seen_ms > ?3)) ${owner}
     RETURNING gateway_id`,
    )
    .bind(gatewayId, accountId, liveSince(env), ...(instance === undefined ? [] : [instance]))
    .first<{ gateway_id: string }>();
  if (granted) return { granted: true, holder: gatewayId };
  const row = await directoryDb(env)
    .prepare('SELECT gateway_id FROM accounts WHERE id = ? AND removed_at_ms IS NULL')
    .bind(accountId)
    .first<{ gateway_id: string | null }>();
  return { granted: false, holder: row?.gateway_id ?? null };
}

/**
 * Answers of calls a gateway makes through the object. A lost lease is an answer, not an exception:
 * errors thrown across RPC are logged as uncaught by the runtime.
 */
export type HolderResult<T> = { ok: true; value: T } | { ok: false; lease_lost: string };
