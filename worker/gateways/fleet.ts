/**
 * The fleet of gateways as D1 sees it: who owns a gateway id, which gateways are live (and so hold
 * their leases, durable/lease.ts), each one's share of the accounts, and the heartbeat that tells a
 * gateway what to take and what to hand over. A heartbeat costs a fixed handful of D1 statements
 * (set-based, json_each), no subrequest and, once the fleet is settled, one row written (the
 * gateway's own), however many accounts the gateway holds.
 */
import type { HeartbeatRequest, HeartbeatResponse, ReleaseRequest } from '../../common/relay.ts';
import { leaseTtlMs, liveSince } from '../durable/lease.ts';
import type { Env } from '../env.ts';
import { isoNow } from '../lib/time.ts';

/** Accounts offered to one gateway per heartbeat: a new gateway fills up in steps, not at once. */
const MAX_CLAIM_PER_HEARTBEAT = 200;
/** Surplus accounts a gateway hands over per heartbeat: a rebalance moves a few at a time. */
const MAX_RELEASE_PER_HEARTBEAT = 20;
/** Gateway rows silent this long are forgotten (every process has an id of its own by default). */
const FORGET_GATEWAYS_AFTER_MS = 24 * 60 * 60 * 1000;

/**
 * Claims the gateway id for this process: granted when the id is new, is this instance's, its owner
 * has been silent for a lease time, or its owner is `takeOverFrom` (found without a live control
 * socket: it stopped or died). Refreshes last_seen_ms (and the capacity, when given). False: another
 * live process uses the id.
 */
export async function registerGateway(
  env: Env,
  caller: { gateway_id: string; instance: string; capacity?: number },
  takeOverFrom: string | null = null,
  now = Date.now(),
): Promise<boolean> {
  const row = await env.DB.prepare(
    `INSERT INTO gateways (id, instance, connected, connected_at, last_seen_ms, capacity) VALUES (?1, ?2, 0, ?3, ?4, coalesce(?5, 1000))
     ON CONFLICT (id) DO UPDATE SET instance = excluded.instance, last_seen_ms = excluded.last_seen_ms,
       capacity = coalesce(?5, gateways.capacity)
     WHERE gateways.instance IS NULL OR gateways.instance = excluded.instance OR gateways.last_seen_ms <= ?6
       OR gateways.instance = ?7
     RETURNING instance`,
  )
    .bind(caller.gateway_id, caller.instance, isoNow(), now, caller.capacity ?? null, liveSince(env, now), takeOverFrom)
    .first<{ instance: string }>();
  return row !== null;
}

/** The process that owns a gateway id, as D1 says. */
export async function ownerOf(env: Env, gatewayId: string): Promise<string | null> {
  const row = await env.DB.prepare('SELECT instance FROM gateways WHERE id = ?')
    .bind(gatewayId)
    .first<{ instance: string | null }>();
  return row?.instance ?? null;
}

interface LiveGateway {
  id: string;
  capacity: number;
}

/** Gateways that heartbeat within a lease time (a stopping one leaves at once: `releaseLeases`). */
async function liveGateways(env: Env, now: number): Promise<LiveGateway[]> {
  const { results } = await env.DB.prepare(
    'SELECT id, capacity FROM gateways WHERE last_seen_ms > ? ORDER BY id LIMIT 1000',
  )
    .bind(liveSince(env, now))
    .all<LiveGateway>();
  return results;
}

/**
 * How many of `total` accounts each gateway should hold: an even split, except that a gateway never
 * gets more than its capacity (the rest goes to the others). Deterministic, so every gateway computes
 * the same shares.
 */
export function shares(total: number, gateways: LiveGateway[]): Map<string, number> {
  const byCapacity = [...gateways].sort((a, b) => a.capacity - b.capacity || (a.id < b.id ? -1 : 1));
  const out = new Map<string, number>();
  let left = total;
  byCapacity.forEach((g, i) => {
    const share = Math.min(g.capacity, Math.ceil(left / (byCapacity.length - i)));
    out.set(g.id, share);
    left -= share;
  });
  return out;
}

/**
 * The caller's heartbeat (its `gateways` row was refreshed on the way in, `registerGateway`: that
 * keeps all its leases). Says which of the accounts it lists are no longer its own, then offers what
 * its share lacks or asks it to hand over its surplus. Writes nothing per account.
 */
export async function heartbeat(env: Env, request: HeartbeatRequest): Promise<HeartbeatResponse> {
  const { gateway_id, held } = request;
  const now = Date.now();
  const heldJson = JSON.stringify(held);
  const db = env.DB;
  const forgetBefore = now - FORGET_GATEWAYS_AFTER_MS;
  const { results: stillHeld } = await db
    .prepare(
      `SELECT id FROM accounts
       WHERE gateway_id = ?1 AND removed_at_ms IS NULL AND id IN (SELECT value FROM json_each(?2))`,
    )
    .bind(gateway_id, heldJson)
    .all<{ id: string }>();
  const kept = new Set(stillHeld.map((r) => r.id));
  const [, totalRow] = await db.batch<{ n: number }>([
    // Written only when it changed: a settled fleet's heartbeat writes just its `gateways` row.
    db
      .prepare(
        `UPDATE gateways SET held = ?1, version = coalesce(?2, version)
         WHERE id = ?3 AND (held IS NOT ?1 OR version IS NOT coalesce(?2, version))`,
      )
      .bind(kept.size, request.version ?? null, gateway_id),
    db.prepare('SELECT count(*) AS n FROM accounts WHERE removed_at_ms IS NULL'),
    // A forgotten gateway lets go of what it still names (nothing, unless no gateway ran for that long).
    db
      .prepare(
        'UPDATE accounts SET gateway_id = NULL WHERE gateway_id IN (SELECT id FROM gateways WHERE last_seen_ms < ?)',
      )
      .bind(forgetBefore),
    db.prepare('DELETE FROM gateways WHERE last_seen_ms < ?').bind(forgetBefore),
  ]);
  const live = await liveGateways(env, now);
  const share = shares(totalRow!.results[0]?.n ?? 0, live).get(gateway_id) ?? 0;
  const response: HeartbeatResponse = {
    lost: held.filter((id) => !kept.has(id)),
    claimable: [],
    release: [],
    lease_ttl_ms: leaseTtlMs(env),
  };
  // An account D1 names for this gateway that it does not list (it restarted with the same id, or
  // never got the answer of a claim) is synced by nobody: it is offered back whatever the share, and
  // a surplus goes on through the hand-over below.
  const capacity = live.find((g) => g.id === gateway_id)?.capacity ?? 0;
  const own = await ownUnlisted(env, gateway_id, heldJson, Math.max(0, capacity - kept.size));
  // A little slack before handing over, so that shares that differ by one do not make accounts move.
  const slack = Math.floor(share / 10);
  if (kept.size > share + slack) {
    response.release = [...kept].slice(share).slice(0, MAX_RELEASE_PER_HEARTBEAT);
    response.claimable = own;
    return response;
  }
  const need = Math.min(share - kept.size - own.length, MAX_CLAIM_PER_HEARTBEAT - own.length);
  if (need <= 0) {
    response.claimable = own;
    return response;
  }
  const rank = Math.max(
    0,
    live.findIndex((g) => g.id === gateway_id),
  );
  response.claimable = [...own, ...(await claimable(env, [...own, ...held], now, need, rank, live.length))];
  return response;
}

/**
 * The caller's own accounts in D1 that its heartbeat did not list, at most a heartbeat's worth of
 * claims. Those past the room the caller has (it came back with a smaller capacity) are let go here,
 * for the others to take (should one of them be in the middle of a claim, its account's object still
 * decides who holds it).
 */
async function ownUnlisted(env: Env, gatewayId: string, heldJson: string, room: number): Promise<string[]> {
  const { results } = await env.DB.prepare(
    `SELECT id FROM accounts WHERE gateway_id = ?1 AND removed_at_ms IS NULL
       AND id NOT IN (SELECT value FROM json_each(?2)) ORDER BY id LIMIT ?3`,
  )
    .bind(gatewayId, heldJson, MAX_CLAIM_PER_HEARTBEAT)
    .all<{ id: string }>();
  const own = results.map((r) => r.id);
  const beyond = own.slice(Math.min(room, MAX_CLAIM_PER_HEARTBEAT));
  if (beyond.length) {
    await env.DB.prepare(
      'UPDATE accounts SET gateway_id = NULL WHERE gateway_id = ?1 AND id IN (SELECT value FROM json_each(?2))',
    )
      .bind(gatewayId, JSON.stringify(beyond))
      .run();
  }
  return own.slice(0, own.length - beyond.length);
}

/**
 * Accounts nobody holds or whose holder's heartbeat ran out, for a caller that has room for `need`
 * more. Gateways that ask at the same moment are offered different ones: each takes its window of
 * the same list, by its rank among the live gateways.
 */
async function claimable(
  env: Env,
  taken: string[],
  now: number,
  need: number,
  rank: number,
  liveCount: number,
): Promise<string[]> {
  const db = env.DB;
  const { results } = await db
    // Nobody's, or a silent gateway's (by the gateways_last_seen and accounts_gateway indexes).
    .prepare(
      `SELECT id FROM accounts WHERE gateway_id IS NULL AND removed_at_ms IS NULL
       UNION
       SELECT a.id FROM gateways g JOIN accounts a ON a.gateway_id = g.id
       WHERE g.last_seen_ms <= ?1 AND a.removed_at_ms IS NULL
       ORDER BY id LIMIT ?2`,
    )
    .bind(liveSince(env, now), Math.min(need * Math.max(1, liveCount), MAX_CLAIM_PER_HEARTBEAT * 4))
    .all<{ id: string }>();
  const skip = new Set(taken);
  const pool = results.map((r) => r.id).filter((id) => !skip.has(id));
  const start = pool.length ? (rank * need) % pool.length : 0;
  const offer: string[] = [];
  for (let i = 0; i < pool.length && offer.length < need; i++) offer.push(pool[(start + i) % pool.length]!);
  return offer;
}

/**
 * Leases given up by their holder, at once (not waited out); a stopping gateway also leaves the
 * live set. Returns the live gateways to tell (`rebalance`), the caller excluded.
 */
export async function releaseLeases(env: Env, request: ReleaseRequest): Promise<string[]> {
  const db = env.DB;
  const now = Date.now();
  await db.batch([
    db
      .prepare(
        `UPDATE accounts SET gateway_id = NULL
         WHERE gateway_id = ?1 AND id IN (SELECT value FROM json_each(?2))`,
      )
      .bind(request.gateway_id, JSON.stringify(request.accounts)),
    request.stopping
      ? db.prepare('UPDATE gateways SET last_seen_ms = 0, held = 0 WHERE id = ?').bind(request.gateway_id)
      : db
          .prepare('UPDATE gateways SET held = max(0, held - ?) WHERE id = ?')
          .bind(request.accounts.length, request.gateway_id),
  ]);
  return (await liveGateways(env, now)).map((g) => g.id).filter((id) => id !== request.gateway_id);
}

/** After a lease was granted: the holder's count, for choosing where the next account goes. */
export async function countHeld(env: Env, gatewayId: string): Promise<void> {
  await env.DB.prepare(
    `UPDATE gateways SET held = (SELECT count(*) FROM accounts WHERE gateway_id = ?1 AND removed_at_ms IS NULL)
     WHERE id = ?1`,
  )
    .bind(gatewayId)
    .run();
}
