/**
 * Header blocks read back from raw sources (sync/email-row.ts keeps only their length in the row,
 * where the source's start parses to the very same headers), and how many R2 reads one request's
 * emails take. Each read is an R2 subrequest, of which an invocation has 50 on the free plan: the
 * starts of sources in one object (a segment holds all the new mail of one change) are read together
 * when they lie close, a large body (`body_key`) is one read, and one request reads at most
 * EMAIL_READS_MAX. A list or thread whose emails would need more shows fewer (`readsFit`), and the
 * rest on the next page.
 */
import type { Env } from '../env.ts';
import { sourceHeaders } from '../ingest/headers.ts';
import { parseBlobRef } from './blobs.ts';
import type { EmailRecord } from './present.ts';

/** R2 reads for one request's emails (large bodies, header blocks): the other subrequests keep 10 of the 50. */
export const EMAIL_READS_MAX = 40;
/** The longest range read at once for the header blocks of several sources in one object. */
const SPAN_MAX_BYTES = 1024 * 1024;

/** One R2 range read and the header blocks it holds (offsets within the object). */
interface SourceRead {
  key: string;
  start: number;
  end: number;
  blocks: { record: Pick<EmailRecord, 'row' | 'bodies'>; offset: number; length: number }[];
}

/** Whether the record's headers are still to be read from its source. */
const wantsSource = (record: Pick<EmailRecord, 'bodies'>): boolean =>
  record.bodies?.header_length !== undefined && !record.bodies.headers;

/** Adds the record's header block to a read of its object that stays within SPAN_MAX_BYTES, or to a new one. */
function plan(reads: SourceRead[], record: Pick<EmailRecord, 'row' | 'bodies'>): void {
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

/**
 * How many of these emails, from the first, one request reads within EMAIL_READS_MAX: their large
 * bodies and, with `headers`, their header blocks. Rows not loaded yet count their large bodies only.
 */
export function readsFit(emails: Pick<EmailRecord, 'row' | 'bodies'>[], { headers }: { headers: boolean }): number {
  const sources: SourceRead[] = [];
  let bodies = 0;
  for (let i = 0; i < emails.length; i++) {
    const email = emails[i]!;
    if (email.row.body_key) bodies += 1;
    if (headers && wantsSource(email)) plan(sources, email);
    if (bodies + sources.length > EMAIL_READS_MAX) return i;
  }
  return emails.length;
}

/** Reads the header blocks these records keep in their sources into their `bodies` (the caller cut them with `readsFit`). */
export async function readSourceHeaders(env: Env, records: EmailRecord[]): Promise<void> {
  const reads: SourceRead[] = [];
  for (const record of records) if (wantsSource(record)) plan(reads, record);
  if (reads.length > EMAIL_READS_MAX)
    throw new Error(`${reads.length} source reads for headers in one request (at most ${EMAIL_READS_MAX})`);
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
