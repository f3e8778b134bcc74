/**
 * Per call, what the Worker asked of Cloudflare during a stretch of a benchmark: the `meter call {…}`
 * lines a Worker started with D1_METER=true logs (worker/lib/d1-meter.ts), one per fetch and per
 * account-object applyChanges, set against the per-invocation limits that wrangler dev does not enforce.
 */
import type { Service } from '../node/service.ts';

/** Cloudflare's limits per invocation: D1 queries (each statement of a batch counts; paid plan) and subrequests (free plan). */
const LIMITS = { statements: 1000, subrequests: 50 } as const;

interface Call {
  kind: string;
  queries: number;
  statements: number;
  subrequests: number;
  ms: number;
}

/** Collects the Worker's call lines from now on; `take()` hands over those since the last take. */
export function meterCalls(service: Service): { take(): Call[] } {
  let calls: Call[] = [];
  service.onWorkerLine((line) => {
    const json = /meter call (\{.*\})/.exec(line)?.[1];
    if (!json) return;
    try {
      calls.push(JSON.parse(json) as Call);
    } catch {
      // a line cut between two chunks of output: one call less in the figures
    }
  });
  return {
    take() {
      const taken = calls;
      calls = [];
      return taken;
    },
  };
}

const figure = (calls: Call[], key: 'queries' | 'statements' | 'subrequests') => {
  const values = calls.map((c) => c[key]);
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  return `max ${Math.max(...values)} mean ${mean.toFixed(1)}`;
};

/** One line per kind of call, most frequent first: calls made and max/mean per call against the limits. */
export function describeCalls(calls: Call[]): string[] {
  const byKind = new Map<string, Call[]>();
  for (const c of calls) byKind.set(c.kind, [...(byKind.get(c.kind) ?? []), c]);
  return [...byKind]
    .sort((a, b) => b[1].length - a[1].length)
    .map(
      ([kind, of]) =>
        `  ${kind}: ${of.length} calls; per call D1 queries ${figure(of, 'queries')}, statements ${figure(of, 'statements')} ` +
        `(limit ${LIMITS.statements}), subrequests ${figure(of, 'subrequests')} (limit ${LIMITS.subrequests}), ` +
        `slowest ${Math.max(...of.map((c) => c.ms))} ms`,
    );
}
