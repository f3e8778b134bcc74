/**
 * An email's bodies and header block as its D1 row keeps them: one `content` BLOB, the JSON of
 * `StoredBodies` compressed with deflate-raw against a preset dictionary of what most mail repeats
 * (content-dictionary.ts). Text and HTML mail shrink to a fraction (HTML with inline styles to about
 * a sixth), and reading gives the very same strings back. Rows written before this form hold
 * `body_html`, `body_plain` and `headers_json` as text; readers accept both (`content` null means
 * the text columns hold everything).
 *
 * The BLOB: a marker byte, the dictionary's number, then the deflate-raw stream. BLOBs written
 * before dictionaries are a bare deflate-raw stream, which can never start with the marker (its
 * first byte would name the reserved block type 3).
 */
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import { CONTENT_DICTIONARIES } from './content-dictionary.ts';
import type { StoredBlob, StoredBodies } from './present.ts';

const MARKER = 0xfe;
/** The dictionary new content is compressed with. */
const DICTIONARY = 1;

/** The BLOB of an email's bodies and headers. */
export async function packContent(content: StoredBodies): Promise<Uint8Array> {
  const packed = deflateRawSync(JSON.stringify(content), { dictionary: CONTENT_DICTIONARIES[DICTIONARY] });
  const out = new Uint8Array(packed.byteLength + 2);
  out.set([MARKER, DICTIONARY]);
  out.set(packed, 2);
  return out;
}

export async function unpackContent(blob: StoredBlob): Promise<StoredBodies> {
  const bytes = blob instanceof Uint8Array ? blob : new Uint8Array(blob);
  return JSON.parse(bytes[0] === MARKER ? withDictionary(bytes) : await withoutDictionary(bytes)) as StoredBodies;
}

function withDictionary(bytes: Uint8Array): string {
  const dictionary = CONTENT_DICTIONARIES[bytes[1]!];
  if (!dictionary) throw new Error(`email content compressed with an unknown dictionary (${bytes[1]})`);
  return inflateRawSync(bytes.subarray(2), { dictionary }).toString('utf8');
}

/** A BLOB written before dictionaries: deflate-raw by the runtime's CompressionStream. */
function withoutDictionary(bytes: Uint8Array): Promise<string> {
  return new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate-raw'))).text();
}

/** Hex of a BLOB: how it travels inside a JSON row (sync/bulk.ts), turned back into bytes by SQLite's unhex(). */
const HEX = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, '0'));
export function blobHex(bytes: Uint8Array): string {
  let out = '';
  for (const b of bytes) out += HEX[b];
  return out;
}
