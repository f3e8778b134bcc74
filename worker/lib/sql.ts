/** Limits of D1 and Queues that every bulk statement or batch must respect, and the helpers that keep to them. */

/** D1 allows 100 bound parameters per statement; chunks of this many leave room for a few fixed ones. */
export const PARAM_CHUNK = 90;

/** A Queue `sendBatch` takes at most 100 messages. */
export const QUEUE_BATCH = 100;

export function chunks<T>(items: T[], size: number = PARAM_CHUNK): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** `?,?,…` for an `IN (…)` list or a VALUES row of `n` bound parameters. */
export const placeholders = (n: number): string => Array.from({ length: n }, () => '?').join(',');
