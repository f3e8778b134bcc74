/**
 * Counting what one invocation of an account's object asks of Cloudflare, since `wrangler dev` and
 * workerd enforce none of the per-invocation limits: D1 queries (each statement of a batch counts)
 * and subrequests (R2, queue and Durable Object calls). The object's `env` is swapped for a metered one, so
 * the real code paths (RPC calls, alarms) are what is counted.
 */
import { runDurableObjectAlarm, runInDurableObject } from 'cloudflare:test';
import type { Env } from '../../worker/env.ts';
import { bindAccountShard, shardByName } from '../../worker/shards/registry.ts';

/** The binding names of the mail shards beside DB. */
const MAIL_SHARD = /^MAIL_DB_\d+$/;

/** Cloudflare's limits per invocation: D1 queries (paid plan; 50 on free) and subrequests (free plan). */
export const LIMITS = { d1: 1000, subrequests: 50, params: 100, valueBytes: 2_000_000 } as const;

export interface Meter {
  d1: number;
  subrequests: number;
  /** The largest counts one invocation reached. */
  max: { d1: number; subrequests: number };
  /** The most parameters one statement bound, and the largest value bound (UTF-8 bytes of a string). */
  bound: { params: number; valueBytes: number };
  invocations: number;
}

function countStatement(statement: D1PreparedStatement, meter: Meter): D1PreparedStatement {
  const bind = statement.bind.bind(statement);
  statement.bind = (...values: unknown[]) => {
    meter.bound.params = Math.max(meter.bound.params, values.length);
    for (const value of values)
      if (typeof value === 'string')
        meter.bound.valueBytes = Math.max(meter.bound.valueBytes, new TextEncoder().encode(value).length);
    return countStatement(bind(...values), meter);
  };
  for (const method of ['run', 'all', 'first', 'raw'] as const) {
    const original = (statement[method] as (...a: unknown[]) => unknown).bind(statement);
    (statement as unknown as Record<string, unknown>)[method] = (...args: unknown[]) => {
      meter.d1 += 1;
      return original(...args);
    };
  }
  return statement;
}

function counting<T extends object>(target: T, onCall: (name: string, args: unknown[]) => void): T {
  return new Proxy(target, {
    get(t, prop) {
      const value = Reflect.get(t, prop);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        onCall(String(prop), args);
        return value.apply(t, args);
      };
    },
  });
}

/** A D1 database whose statements count, each statement of a batch too. */
function meteredDb(base: D1Database, meter: Meter): D1Database {
  return new Proxy(base, {
    get(t, prop) {
      if (prop === 'prepare') return (sql: string) => countStatement(t.prepare(sql), meter);
      if (prop === 'batch')
        return (statements: D1PreparedStatement[]) => {
          meter.d1 += statements.length;
          return t.batch(statements);
        };
      const value = Reflect.get(t, prop);
      return typeof value === 'function' ? value.bind(t) : value;
    },
  });
}

/** Every D1 binding of `base` metered: the directory and each mail shard (worker/shards/registry.ts). */
export function meteredEnv(base: Env, meter: Meter): Env {
  const databases = Object.entries(base)
    .filter(([name, value]) => value !== undefined && (name === 'DB' || name === 'DIRECTORY' || MAIL_SHARD.test(name)))
    .map(([name, value]) => [name, meteredDb(value as D1Database, meter)]);
  const subrequest = () => {
    meter.subrequests += 1;
  };
  return {
    ...base,
    ...Object.fromEntries(databases),
    BLOBS: counting(base.BLOBS, subrequest),
    WEBHOOKS: counting(base.WEBHOOKS, subrequest),
    ACCOUNTS: countingObjects(base.ACCOUNTS, subrequest),
    GATEWAYS: countingObjects(base.GATEWAYS, subrequest),
  };
}

/** A Durable Object namespace whose stubs count every call (RPC method or fetch) as a subrequest. */
function countingObjects(namespace: DurableObjectNamespace, onCall: () => void): DurableObjectNamespace {
  return new Proxy(namespace, {
    get(t, prop) {
      const value = Reflect.get(t, prop);
      if (prop === 'get')
        return (...args: unknown[]) => {
          const stub = (value as (...a: unknown[]) => DurableObjectStub).apply(t, args);
          return new Proxy(stub, {
            get(s, name) {
              const member = Reflect.get(s, name);
              if (typeof member !== 'function' || name === 'then') return member;
              return (...callArgs: unknown[]) => {
                onCall();
                // Reflect.apply: an RPC method's own `.apply` would be taken for a remote method.
                return Reflect.apply(member as (...a: unknown[]) => unknown, s, callArgs);
              };
            },
          });
        };
      return typeof value === 'function' ? value.bind(t) : value;
    },
  });
}

export function newMeter(): Meter {
  return { d1: 0, subrequests: 0, max: { d1: 0, subrequests: 0 }, bound: { params: 0, valueBytes: 0 }, invocations: 0 };
}

/**
 * Swaps the object's env for a metered one (the instance keeps it until it is evicted), bound to
 * the account's shard as the object's own env is: its mail in the shard, the directory beside it.
 */
export async function meterObject(stub: DurableObjectStub, base: Env, meter: Meter): Promise<void> {
  await runInDurableObject(stub, (instance) => {
    const object = instance as unknown as { env: Env };
    const metered = meteredEnv(base, meter);
    bindAccountShard(metered, shardByName(metered, object.env.SHARD_NAME));
    object.env = metered;
  });
}

/** Runs one invocation and records its counts. */
export async function invocation<T>(meter: Meter, work: () => Promise<T>): Promise<T> {
  meter.d1 = 0;
  meter.subrequests = 0;
  const result = await work();
  meter.invocations += 1;
  meter.max.d1 = Math.max(meter.max.d1, meter.d1);
  meter.max.subrequests = Math.max(meter.max.subrequests, meter.subrequests);
  return result;
}

/** Runs the object's alarms, each one invocation, until none is set; how many ran. */
export async function drainAlarms(stub: DurableObjectStub, meter: Meter, max = 500): Promise<number> {
  let runs = 0;
  while (runs < max && (await invocation(meter, () => runDurableObjectAlarm(stub)))) runs += 1;
  return runs;
}
