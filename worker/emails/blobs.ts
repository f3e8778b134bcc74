/**
 * Where an email's bytes live in R2, and reading and releasing them.
 *
 * A reference (`raw_key`, `body_key`, an attachment's `blob_key`) is either a whole object's key or
 * a byte range of a _segment_: one object per applied change holding the sources, large bodies and
 * attachments of all its new emails, written with one R2 call (`<key>#<offset>+<length>`). A segment
 * is deleted when the last email whose raw source is in it goes. Staged sources (the gateway's large
 * messages) stay objects of their own, shared by identical copies, deleted after a grace.
 */
import type { Env } from '../env.ts';
import { deleteBlobs } from './delete.ts';

const RANGE = /^(.*)#(\d+)\+(\d+)$/;
const SEGMENT_MARK = '/segments/';
const STAGED_MARK = '/staged/';

export interface BlobRef {
  key: string;
  range?: { offset: number; length: number };
}

export const segmentRef = (key: string, offset: number, length: number): string => `${key}#${offset}+${length}`;

export function parseBlobRef(ref: string): BlobRef {
  const m = RANGE.exec(ref);
  return m ? { key: m[1]!, range: { offset: Number(m[2]), length: Number(m[3]) } } : { key: ref };
}

/** The bytes a reference names (a range of a segment, or a whole object), or null when gone. */
export async function readBlob(env: Env, ref: string): Promise<{ object: R2ObjectBody; size: number } | null> {
  const { key, range } = parseBlobRef(ref);
  const object = await env.BLOBS.get(key, range ? { range } : undefined);
  if (!object) return null;
  return { object, size: range ? range.length : object.size };
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

/** The start of a segment's digest, as its index keeps it (migrations/0029_short_email_indexes.sql). */
const segmentDigest = (key: string): string =>
  `substr(${key}, instr(${key}, '${SEGMENT_MARK}') + ${SEGMENT_MARK.length}, 16)`;

/** Which of these segments still hold the raw source of some email, in one query (partial index). */
export async function segmentsInUse(env: Env, keys: string[]): Promise<Set<string>> {
  if (keys.length === 0) return new Set();
  const { results } = await env.DB.prepare(
    `SELECT j.value AS k FROM json_each(?) j WHERE EXISTS (
       SELECT 1 FROM emails WHERE raw_key GLOB '*/segments/*' AND ${segmentDigest('raw_key')} = ${segmentDigest('j.value')}
       AND raw_key > j.value || '#' AND raw_key < j.value || '$')`,
  )
    .bind(JSON.stringify([...new Set(keys)]))
    .all<{ k: string }>();
  return new Set(results.map((r) => r.k));
}

/** The staged sources among references: never deleted at once (durable/staged-releases.ts). */
export const stagedKeys = (refs: (string | null | undefined)[]): string[] => [
  ...new Set(refs.filter((r): r is string => !!r && r.includes(STAGED_MARK)).map((r) => parseBlobRef(r).key)),
];

/**
 * After emails' rows were deleted: deletes the objects their references named that no remaining
 * email uses (a segment may serve other emails too), in as few R2 calls as allowed. Staged sources
 * are left to the account object, which deletes them after a grace (`stagedKeys`, `releaseStaged`).
 */
export async function releaseBlobs(env: Env, refs: (string | null | undefined)[]): Promise<void> {
  const keys = [...new Set(refs.filter((r): r is string => !!r).map((r) => parseBlobRef(r).key))].filter(
    (k) => !k.includes(STAGED_MARK),
  );
  const segmentsUsed = await segmentsInUse(
    env,
    keys.filter((k) => k.includes(SEGMENT_MARK)),
  );
  await deleteBlobs(
    env.BLOBS,
    keys.filter((k) => !segmentsUsed.has(k)),
  );
}

/**
 * Staged sources whose grace ran out: deleted unless an email uses them, or the gateway uploaded
 * them again after they were recorded (a change naming them is on its way). One query, one R2 head
 * per source, one delete call.
 */
export async function releaseStaged(env: Env, releases: { key: string; recorded_ms: number }[]): Promise<void> {
  const used = await stagedInUse(
    env,
    releases.map((r) => r.key),
  );
  const unused = releases.filter((r) => !used.has(r.key));
  const heads = await Promise.all(unused.map((r) => env.BLOBS.head(r.key)));
  await deleteBlobs(
    env.BLOBS,
    unused.filter((r, i) => heads[i] && heads[i].uploaded.getTime() <= r.recorded_ms).map((r) => r.key),
  );
}
