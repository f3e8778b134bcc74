/** What an account's object grants a gateway, and what the gateway-facing endpoints and commands share about it. */

export interface Lease {
  gateway_id: string;
  expires_at: number;
}

/** How long a lease lasts without a heartbeat. */
export const LEASE_TTL_MS = 60_000;

/**
 * Answers of calls a gateway makes through the object. A lost lease is an answer, not an exception:
 * errors thrown across RPC are logged as uncaught by the runtime.
 */
export type HolderResult<T> = { ok: true; value: T } | { ok: false; lease_lost: string };
