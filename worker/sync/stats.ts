/**
 * What applying a batch of changes cost: D1 statements (lookups and writes, each statement of a
 * batch counted, as Cloudflare counts them), rows written, R2 operations, and the wall time of each
 * stage. The account's object logs one line per batch that brought new mail (`sync stats {…}`);
 * `npm run bench sync` sums them into its per-stage breakdown.
 */
import type { Env } from '../env.ts';

export interface SyncStats {
  /** Messages relayed, and the new emails made of them. */
  messages: number;
  created: number;
  d1Statements: number;
  d1RowsWritten: number;
  r2Ops: number;
  /** Milliseconds: parsing sources, lookups before deciding, building rows, R2 writes, D1 batches. */
  parseMs: number;
  lookupMs: number;
  buildMs: number;
  r2Ms: number;
  d1Ms: number;
  /** The whole batch, as the account's object ran it. */
  applyMs: number;
}

export const newStats = (): SyncStats => ({
  messages: 0,
  created: 0,
  d1Statements: 0,
  d1RowsWritten: 0,
  r2Ops: 0,
  parseMs: 0,
  lookupMs: 0,
  buildMs: 0,
  r2Ms: 0,
  d1Ms: 0,
  applyMs: 0,
});

type TimedStage = 'parseMs' | 'lookupMs' | 'buildMs' | 'r2Ms' | 'd1Ms';

/** Runs `work`, adding its wall time to one stage. */
export async function timed<T>(stats: SyncStats | undefined, stage: TimedStage, work: () => Promise<T>): Promise<T> {
  const start = performance.now();
  try {
    return await work();
  } finally {
    if (stats) stats[stage] += performance.now() - start;
  }
}

/** Counts the statement's own runs; patched in place (D1's batch takes only its own statement objects). */
function countingStatement(statement: D1PreparedStatement, stats: SyncStats): D1PreparedStatement {
  const bind = statement.bind.bind(statement);
  statement.bind = (...values: unknown[]) => countingStatement(bind(...values), stats);
  for (const method of ['run', 'all', 'first', 'raw'] as const) {
    const original = (statement[method] as (...a: unknown[]) => unknown).bind(statement);
    (statement as unknown as Record<string, unknown>)[method] = (...args: unknown[]) => {
      stats.d1Statements += 1;
      return original(...args);
    };
  }
  return statement;
}

/** The env with D1 and R2 counted into `stats` (the statements it prepares still batch with the real D1). */
export function countingEnv(env: Env, stats: SyncStats): Env {
  const db = new Proxy(env.DB, {
    get(target, prop) {
      if (prop === 'prepare') return (sql: string) => countingStatement(target.prepare(sql), stats);
      if (prop === 'batch')
        return async (statements: D1PreparedStatement[]) => {
          stats.d1Statements += statements.length;
          const results = await target.batch(statements);
          for (const r of results) stats.d1RowsWritten += r.meta?.rows_written ?? 0;
          return results;
        };
      const value = Reflect.get(target, prop);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const blobs = new Proxy(env.BLOBS, {
    get(target, prop) {
      const value = Reflect.get(target, prop);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        stats.r2Ops += 1;
        return value.apply(target, args);
      };
    },
  });
  return { ...env, DB: db, BLOBS: blobs };
}

/** One log line per batch that brought mail: counts and milliseconds, nothing from the messages themselves. */
export function logStats(stats: SyncStats): void {
  const rounded = Object.fromEntries(Object.entries(stats).map(([k, v]) => [k, Math.round(v * 10) / 10]));
  console.log(`sync stats ${JSON.stringify(rounded)}`);
}
