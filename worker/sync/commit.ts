/**
 * Writing a ChangeResult: its R2 objects first, then its statements as D1 batches (one transaction
 * each), cut only where a unit ends so no message is ever half written without its event. The
 * outbox rows of a batch's events are written in bulk at its end (sync/bulk.ts).
 */
import type { Env } from '../env.ts';
import { directoryDb } from '../shards/registry.ts';
import { eventRows } from './bulk.ts';
import type { ChangeResult } from './state.ts';
import { timed } from './stats.ts';
import type { SyncStats } from './stats.ts';

/** Statements per D1 batch (one transaction) before a change is split, at unit ends only. */
const MAX_BATCH_STATEMENTS = 400;

/** Where the statements of a change are cut into D1 batches: whole when small, else only where a unit ends. */
function batchEnds({ statements, unitEnds }: Pick<ChangeResult, 'statements' | 'unitEnds'>): number[] {
  const ends: number[] = [];
  let start = 0;
  while (start < statements.length) {
    let end = statements.length;
    if (end - start > MAX_BATCH_STATEMENTS) {
      const fits = unitEnds.filter((e) => e > start && e <= start + MAX_BATCH_STATEMENTS);
      // The last unit end that fits; a single unit bigger than the limit still goes whole.
      end = fits.length ? fits[fits.length - 1]! : (unitEnds.find((e) => e > start) ?? statements.length);
    }
    ends.push(end);
    start = end;
  }
  return ends;
}

/** The statements of a change as D1 batches (without their events' outbox rows). */
export function d1Batches(result: Pick<ChangeResult, 'statements' | 'unitEnds'>): D1PreparedStatement[][] {
  const ends = batchEnds(result);
  return ends.map((end, i) => result.statements.slice(i === 0 ? 0 : ends[i - 1], end));
}

/** The D1 batches of a change, each with the outbox rows of the events added among its statements. */
export function batchesWithEvents(db: D1Database, result: ChangeResult): D1PreparedStatement[][] {
  const ends = batchEnds(result);
  if (ends.length === 0) return result.events.length ? [eventRows(db, result.events)] : [];
  let start = 0;
  return ends.map((end, i) => {
    const last = i === ends.length - 1;
    // An event added when `start` statements existed belongs to the unit that ended there.
    const events = result.events.filter((_, k) => {
      const mark = result.eventMarks[k]!;
      return (mark > start || (start === 0 && mark === 0)) && (mark <= end || last);
    });
    const batch = [...result.statements.slice(start, end), ...eventRows(db, events)];
    start = end;
    return batch;
  });
}

/** R2 first (keys derive from identities or the change, so a retry rewrites the same objects), then D1. */
export async function writeResult(env: Env, result: ChangeResult, stats?: SyncStats): Promise<void> {
  await timed(stats, 'r2Ms', () =>
    Promise.all(
      result.blobs.map((b) => env.BLOBS.put(b.key, b.body, { httpMetadata: { contentType: b.contentType } })),
    ),
  );
  await timed(stats, 'd1Ms', async () => {
    if (result.directory.length) await directoryDb(env).batch(result.directory);
    for (const batch of batchesWithEvents(env.DB, result)) await env.DB.batch(batch);
  });
}
