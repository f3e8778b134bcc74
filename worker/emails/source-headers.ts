/**
 * Header blocks read back from raw sources (sync/email-row.ts keeps only their length in the row,
 * where the source's start parses to the very same headers). Each read is an R2 subrequest, of which
 * an invocation has 50 on the free plan: the starts of sources in one object (a segment holds all the
 * new mail of one change) are read together when they lie close, and one request reads at most
 * SOURCE_READS_MAX objects' ranges. A list or thread that would need more shows fewer emails
 * (`sourceHeadersFit`), and the rest on the next page.
 */
import type { Env } from '../env.ts';
import { sourceHeaders } from '../ingest/headers.ts';
import { parseBlobRef } from './blobs.ts';
import type { EmailRecord } from './present.ts';

/** R2 reads for header blocks in one request: the other subrequests keep 10 of the 50. */
export const SOURCE_READS_MAX = 40;
/** The longest range read at once for the header blocks of several sources in one object. */
const SPAN_MAX_BYTES = 1024 * 1024;

/** One R2 range read and the header blocks it holds (offsets within the object). */
interface SourceRead {
  key: string;
  start: number;
  end: number;
  blocks: { record: EmailRecord; offset: number; length: number }[];
}

/** Whether the record's headers are still to be read from its source. */
const wantsSource = (record: EmailRecord): boolean =>
  record.bodies?.header_length !== undefined && !record.bodies.headers;

/** Adds the record's header block to a read of its object that stays within SPAN_MAX_BYTES, or to a new one. */
function plan(reads: SourceRead[], record: EmailRecord): void {
  const ref = record.row.raw_key;
  if (!ref) throw new Error(`email ${record.row.id} has no raw source to read its headers from`);
  const { key, range } = parseBlobRef(ref);
  const offset = range?.offset ?? 0;
  const length = Math.min(record.bodies!.header_length!, range?.length ?? Number.POSITIVE_INFINITY);
  const block = { record, offset, length };
  const joined = reads.find(
    (r) => r.key === key && Math.max(r.end, offset + length) - Math.min(r.start, offset) <= SPAN_MAX_BYTES,
  );
  if (!joined) {
    reads.push({ key, start: offset, end: offset + length, blocks: [block] });
    return;
  }
  joined.start = Math.min(joined.start, offset);
  joined.end = Math.max(joined.end, offset + length);
  joined.blocks.push(block);
}

/** How many of these records, from the first, have their header blocks read within one request's reads. */
export function sourceHeadersFit(records: EmailRecord[]): number {
  const reads: SourceRead[] = [];
  for (let i = 0; i < records.length; i++) {
    if (!wantsSource(records[i]!)) continue;
    plan(reads, records[i]!);
    if (reads.length > SOURCE_READS_MAX) return i;
  }
  return records.length;
}

/** Reads the header blocks these records keep in their sources into their `bodies` (all within SOURCE_READS_MAX reads). */
export async function readSourceHeaders(env: Env, records: EmailRecord[]): Promise<void> {
  const reads: SourceRead[] = [];
  for (const record of records) if (wantsSource(record)) plan(reads, record);
  if (reads.length > SOURCE_READS_MAX)
    throw new Error(`${reads.length} source reads for headers in one request (at most ${SOURCE_READS_MAX})`);
  await Promise.all(
    reads.map(async (read) => {
      const object = await env.BLOBS.get(read.key, { range: { offset: read.start, length: read.end - read.start } });
      if (!object) throw new Error(`the raw source ${read.key} is missing: headers cannot be read`);
      const bytes = new Uint8Array(await object.arrayBuffer());
      for (const { record, offset, length } of read.blocks)
        record.bodies!.headers = sourceHeaders(bytes.subarray(offset - read.start, offset - read.start + length));
    }),
  );
}
