/**
 * What the Worker asks of D1 and how often it is invoked, for benchmarks (`npm run bench latency`):
 * on only when the var D1_METER is "true" (never in production). Totals since the isolate started
 * (in local workerd the Worker and its objects share one isolate), logged as one `d1 meter {…}`
 * line at most once a second, when D1 is used: statements, writing statements (INSERT, UPDATE,
 * DELETE, REPLACE), rows written as D1 reports them (indexes included, as Cloudflare bills them),
 * and invocations by kind (a fetch by its route, a queue batch, a scheduled run).
 *
 * Per call too (`npm run bench big-folder`): what one invocation run through `meterCall` asked of
 * Cloudflare, logged as one `meter call {…}` line when it ends: D1 queries (a statement's run, or a
 * batch), statements (each statement of a batch counts, as the 1,000 per invocation do) and
 * subrequests (R2, the queue and Durable Object calls, the 50 per invocation). Work an invocation
 * leaves running after it answers is not in its line.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Env } from '../env.ts';

interface Totals {
  statements: number;
  writes: number;
  rows_written: number;
  invocations: Record<string, number>;
}

const totals: Totals = { statements: 0, writes: 0, rows_written: 0, invocations: {} };
let loggedAt = 0;
const metered = new WeakSet<object>();

const enabled = (env: Env) => env.D1_METER === 'true';

interface CallCounts {
  queries: number;
  statements: number;
  subrequests: number;
}

const currentCall = new AsyncLocalStorage<CallCounts>();

/** Runs one invocation (`kind`: a route, an object's method) and logs what it asked of Cloudflare. */
export async function meterCall<T>(env: Env, kind: string, work: () => Promise<T>): Promise<T> {
  if (!enabled(env)) return work();
  const counts: CallCounts = { queries: 0, statements: 0, subrequests: 0 };
  const started = Date.now();
  try {
    return await currentCall.run(counts, work);
  } finally {
    console.log(`meter call ${JSON.stringify({ kind, ...counts, ms: Date.now() - started })}`);
  }
}

function countSubrequest(): void {
  const call = currentCall.getStore();
  if (call) call.subrequests += 1;
}

/** Every method call on `target` counts as a subrequest (R2, the queue). */
function countingCalls<T extends object>(target: T): T {
  return new Proxy(target, {
    get(t, prop) {
      const value = Reflect.get(t, prop);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        countSubrequest();
        return Reflect.apply(value, t, args);
      };
    },
  });
}

/** A namespace whose stubs count every call (an RPC method or fetch) as a subrequest. */
function countingObjects(namespace: DurableObjectNamespace): DurableObjectNamespace {
  return new Proxy(namespace, {
    get(t, prop) {
      const value = Reflect.get(t, prop);
      if (typeof value !== 'function') return value;
      if (prop !== 'get') return value.bind(t);
      return (...args: unknown[]) =>
        new Proxy(Reflect.apply(value, t, args) as DurableObjectStub, {
          get(stub, name) {
            const member = Reflect.get(stub, name);
            if (typeof member !== 'function' || name === 'then') return member;
            return (...callArgs: unknown[]) => {
              countSubrequest();
              // Reflect.apply: an RPC method's own `.apply` would be taken for a remote method.
              return Reflect.apply(member as (...a: unknown[]) => unknown, stub, callArgs);
            };
          },
        });
    },
  });
}

/** Counts one invocation of the Worker (`kind`: a route, `queue`, `scheduled`). */
export function meterInvocation(env: Env, kind: string): void {
  if (!enabled(env)) return;
  totals.invocations[kind] = (totals.invocations[kind] ?? 0) + 1;
}

/** The kind of a fetch: its path with ids and hashes left out (`/internal/gateway/accounts/:id/changes`). */
export function routeKind(request: Request): string {
  const path = new URL(request.url).pathname
    .split('/')
    .map((part) => (/^[a-z]+_[0-9A-Za-z]{8,}$|^[0-9a-f]{32,}$/.test(part) ? ':id' : part))
    .join('/');
  return `${request.method} ${path}`;
}

/** A D1 binding whose statements and batches are counted. */
function meterDb(base: D1Database): D1Database {
  const db = new Proxy(base, {
    get(target, prop) {
      if (prop === 'prepare') return (sql: string) => meterStatement(target.prepare(sql), sql);
      if (prop === 'batch')
        return async (statements: D1PreparedStatement[]) => {
          countQuery();
          for (const statement of statements) countStatement(statement);
          const results = await target.batch(statements);
          for (const r of results) addRows(r.meta);
          return results;
        };
      const value = Reflect.get(target, prop);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  metered.add(db);
  return db;
}

/** Env with its D1 bindings (DB and every mail shard) counted, when D1_METER is on; else env itself. */
export function meteredEnv(env: Env): Env {
  if (!enabled(env) || metered.has(env.DB)) return env;
  const shards = Object.fromEntries(
    Object.entries(env)
      .filter(([name]) => /^MAIL_DB_[0-9]+$/.test(name))
      .map(([name, db]) => [name, meterDb(db as D1Database)]),
  );
  return {
    ...env,
    ...shards,
    DB: meterDb(env.DB),
    BLOBS: countingCalls(env.BLOBS),
    WEBHOOKS: countingCalls(env.WEBHOOKS),
    ACCOUNTS: countingObjects(env.ACCOUNTS),
    GATEWAYS: countingObjects(env.GATEWAYS),
  };
}

function addRows(meta: { rows_written?: number } | undefined): void {
  totals.rows_written += meta?.rows_written ?? 0;
  log();
}

/**
 * Counts the statement when it runs (alone or in a batch); patched in place, since D1's batch takes
 * only its own statement objects. `first` runs as `all` to read the rows written.
 */
function meterStatement(statement: D1PreparedStatement, sql: string): D1PreparedStatement {
  writing.set(statement, /^\s*(insert|update|delete|replace)\b/i.test(sql));
  const bind = statement.bind.bind(statement);
  statement.bind = (...values: unknown[]) => meterStatement(bind(...values), sql);
  const count = () => {
    countQuery();
    countStatement(statement);
  };
  const all = statement.all.bind(statement);
  const run = statement.run.bind(statement);
  const raw = statement.raw.bind(statement);
  const counted = (call: () => Promise<D1Result>) => async () => {
    count();
    const result = await call();
    addRows(result.meta);
    return result;
  };
  statement.all = counted(all) as typeof statement.all;
  statement.run = counted(run) as typeof statement.run;
  statement.first = (async (column?: string) => {
    count();
    const result = await all<Record<string, unknown>>();
    addRows(result.meta);
    const row = result.results[0] ?? null;
    return column === undefined ? row : (row?.[column] ?? null);
  }) as typeof statement.first;
  statement.raw = ((options?: { columnNames?: boolean }) => {
    count();
    return raw(options as { columnNames: true });
  }) as typeof statement.raw;
  return statement;
}

/** Whether each metered statement writes. */
const writing = new WeakMap<D1PreparedStatement, boolean>();

function countQuery(): void {
  const call = currentCall.getStore();
  if (call) call.queries += 1;
}

function countStatement(statement: D1PreparedStatement): void {
  totals.statements += 1;
  const call = currentCall.getStore();
  if (call) call.statements += 1;
  if (writing.get(statement)) totals.writes += 1;
}

function log(): void {
  const now = Date.now();
  if (now - loggedAt < 1000) return;
  loggedAt = now;
  console.log(`d1 meter ${JSON.stringify(totals)}`);
}
