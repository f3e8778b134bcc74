/**
 * Leases: which gateway holds an account. The account's object says who the holder is and refuses
 * changes from anyone else; D1 (`accounts.gateway_id`, `lease_expires_ms`) says until when, so that
 * a heartbeat renews all of a gateway's leases in one statement instead of one call per object.
 * A lease changes hands only through `claimLease` (a compare-and-set in D1), run by the object.
 */
import type { Env } from '../env.ts';

export interface Lease {
  gateway_id: string;
  /** When the lease ran out as last granted; renewals happen in D1 only (see above). */
  expires_at: number;
}

/** How long a lease lasts without a heartbeat, unless GATEWAY_LEASE_TTL_SECONDS says otherwise. */
export const LEASE_TTL_MS = 60_000;

/** GATEWAY_LEASE_TTL_SECONDS (5–3600), else LEASE_TTL_MS. */
export function leaseTtlMs(env: Env): number {
  const seconds = Number(env.GATEWAY_LEASE_TTL_SECONDS);
  return Number.isInteger(seconds) && seconds >= 5 && seconds <= 3600 ? seconds * 1000 : LEASE_TTL_MS;
}

/**
 * Gives the account to `gatewayId` in D1 if nobody holds it, the holder's lease ran out, or the caller
 * holds it already; with `instance`, only while that process owns the gateway id. Returns who holds
 * it afterwards (null: the account is gone or removed).
 */
export async function claimLease(
  env: Env,
  accountId: string,
  gatewayId: string,
  instance: string | undefined,
): Promise<{ granted: boolean; holder: string | null; expiresAt: number }> {
  const now = Date.now();
  const expiresAt = now + leaseTtlMs(env);
  const owner = instance === undefined ? '' : 'AND EXISTS (SELECT 1 FROM gateways WHERE id = ?1 AND instance = ?5)';
  const granted = await env.DB.prepare(
    `UPDATE accounts SET gateway_id = ?1, lease_expires_ms = ?2
     WHERE id = ?3 AND removed_at_ms IS NULL AND (gateway_id IS NULL OR gateway_id = ?1 OR lease_expires_ms <= ?4) ${owner}
     RETURNING gateway_id`,
  )
    .bind(gatewayId, expiresAt, accountId, now, ...(instance === undefined ? [] : [instance]))
    .first<{ gateway_id: string }>();
  if (granted) return { granted: true, holder: gatewayId, expiresAt };
  const row = await env.DB.prepare('SELECT gateway_id FROM accounts WHERE id = ? AND removed_at_ms IS NULL')
    .bind(accountId)
    .first<{ gateway_id: string | null }>();
  return { granted: false, holder: row?.gateway_id ?? null, expiresAt };
}

/**
 * Answers of calls a gateway makes through the object. A lost lease is an answer, not an exception:
 * errors thrown across RPC are logged as uncaught by the runtime.
 */
export type HolderResult<T> = { ok: true; value: T } | { ok: false; lease_lost: string };
