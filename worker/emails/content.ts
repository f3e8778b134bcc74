/**
 * An email's bodies and header block as its D1 row keeps them: one `content` BLOB, the JSON of
 * `StoredBodies` compressed with deflate-raw (the runtime's CompressionStream). Text and HTML mail
 * shrink to a fraction (HTML with inline styles to about a fifth), and reading gives the very same
 * strings back. Rows written before this form hold `body_html`, `body_plain` and `headers_json` as
 * text; readers accept both (`content` null means the text columns hold everything).
 */
import type { StoredBlob, StoredBodies } from './present.ts';

const FORMAT = 'deflate-raw';

async function collect(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** The BLOB of an email's bodies and headers. */
export async function packContent(content: StoredBodies): Promise<Uint8Array> {
  const json = new Blob([JSON.stringify(content)]);
  return collect(json.stream().pipeThrough(new CompressionStream(FORMAT)));
}

export async function unpackContent(blob: StoredBlob): Promise<StoredBodies> {
  const bytes = blob instanceof Uint8Array ? blob : new Uint8Array(blob);
  const text = await new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream(FORMAT))).text();
  return JSON.parse(text) as StoredBodies;
}

/** Hex of a BLOB: how it travels inside a JSON row (sync/bulk.ts), turned back into bytes by SQLite's unhex(). */
const HEX = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, '0'));
export function blobHex(bytes: Uint8Array): string {
  let out = '';
  for (const b of bytes) out += HEX[b];
  return out;
}
