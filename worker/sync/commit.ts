/**
 * Writing a ChangeResult: its R2 objects first, then its statements as D1 batches (one transaction
 * each), cut only where a unit ends so no message is ever half written without its event.
 */
import { deleteBlobs } from '../emails/delete.ts';
import type { Env } from '../env.ts';
import type { ChangeResult } from './state.ts';

/** Statements per D1 batch (one transaction) before a change is split, at unit ends only. */
const MAX_BATCH_STATEMENTS = 400;

/** The statements of a change as D1 batches: whole when small, else cut only where a unit ends. */
export function d1Batches(result: Pick<ChangeResult, 'statements' | 'unitEnds'>): D1PreparedStatement[][] {
  const { statements, unitEnds } = result;
  const out: D1PreparedStatement[][] = [];
  let start = 0;
  while (start < statements.length) {
    let end = statements.length;
    if (end - start > MAX_BATCH_STATEMENTS) {
      const fits = unitEnds.filter((e) => e > start && e <= start + MAX_BATCH_STATEMENTS);
      // The last unit end that fits; a single unit bigger than the limit still goes whole.
      end = fits.length ? fits[fits.length - 1]! : (unitEnds.find((e) => e > start) ?? statements.length);
    }
    out.push(statements.slice(start, end));
    start = end;
  }
  return out;
}

/** R2 first (keys derive from identities, so a retry rewrites the same objects), then D1. */
export async function writeResult(env: Env, result: ChangeResult): Promise<void> {
  await Promise.all(
    result.blobs.map((b) => env.BLOBS.put(b.key, b.body, { httpMetadata: { contentType: b.contentType } })),
  );
  for (const batch of d1Batches(result)) await env.DB.batch(batch);
  if (result.unusedStaged.length === 0) return;
  const used = await stagedInUse(env, result.unusedStaged);
  const unused = [...new Set(result.unusedStaged)].filter((key) => !used.has(key));
  await deleteBlobs(env.BLOBS, unused);
}

/** Which of these staged sources are still the raw source of some email, in one query. */
export async function stagedInUse(env: Env, keys: string[]): Promise<Set<string>> {
  if (keys.length === 0) return new Set();
  // The GLOB term repeats the partial index's condition, so SQLite answers from that index.
  const { results } = await env.DB.prepare(
    "SELECT DISTINCT raw_key FROM emails WHERE raw_key IN (SELECT value FROM json_each(?)) AND raw_key GLOB '*/staged/*'",
  )
    .bind(JSON.stringify([...new Set(keys)]))
    .all<{ raw_key: string }>();
  return new Set(results.map((r) => r.raw_key));
}
