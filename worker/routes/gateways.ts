/**
 * GET /gateways: the live fleet, for an operator's eye (the dashboard's "Gateways"). Two D1
 * statements however large the fleet: the live gateways, and the accounts each holds.
 */
import { Hono } from 'hono';
import { liveSince } from '../durable/lease.ts';
import type { AppEnv, Env } from '../env.ts';
import type { Gateways } from '../schemas/gateways.ts';

interface GatewayRow {
  id: string;
  connected: number;
  connected_at: string;
  last_seen_ms: number;
  capacity: number;
  version: string | null;
}

/** The live fleet can be no larger than this in one answer (each gateway holds up to its capacity). */
const MAX_GATEWAYS = 1000;

export async function listGateways(env: Env, now = Date.now()): Promise<Gateways> {
  const db = env.DB;
  const [gateways, held] = await db.batch<any>([
    db
      .prepare(
        `SELECT id, connected, connected_at, last_seen_ms, capacity, version FROM gateways
         WHERE last_seen_ms > ? ORDER BY id LIMIT ${MAX_GATEWAYS}`,
      )
      .bind(liveSince(env, now)),
    // A live gateway holds every account that names it (durable/lease.ts).
    db
      .prepare(
        `SELECT a.gateway_id, count(*) AS n FROM gateways g JOIN accounts a ON a.gateway_id = g.id
         WHERE g.last_seen_ms > ? AND a.removed_at_ms IS NULL GROUP BY a.gateway_id`,
      )
      .bind(liveSince(env, now)),
  ]);
  const counts = new Map((held!.results as { gateway_id: string; n: number }[]).map((r) => [r.gateway_id, r.n]));
  return {
    object: 'Gateways',
    data: (gateways!.results as GatewayRow[]).map((row) => ({
      object: 'Gateway' as const,
      id: row.id,
      accounts_held: counts.get(row.id) ?? 0,
      capacity: row.capacity,
      connected: row.connected === 1,
      connected_at: row.connected_at,
      last_heartbeat_at: new Date(row.last_seen_ms).toISOString(),
      version: row.version,
    })),
  };
}

export const gateways = new Hono<AppEnv>().get('/', async (c) => c.json(await listGateways(c.env)));
