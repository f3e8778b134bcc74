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

/** Whether a query (`SELECT 1 … LIMIT 1`) finds a row. */
export async function rowExists(db: D1Database, sql: string, ...params: unknown[]): Promise<boolean> {
  return (
    (await db
      .prepare(sql)
      .bind(...params)
      .first()) !== null
  );
}

/** `?,?,…` for an `IN (…)` list or a VALUES row of `n` bound parameters. */
export const placeholders = (n: number): string => Array.from({ length: n }, () => '?').join(',');

/** Bytes of JSON bound to one statement: D1 takes 2,000,000 bytes per value; this leaves room. */
export const JSON_PARAM_BYTES = 1_800_000;

/** UTF-8 length of a string, at most over-counted (each non-ASCII UTF-16 unit counted as 3 bytes). */
const utf8Bound = (text: string): number => text.length + 2 * (text.match(/[\u0080-\uffff]/g)?.length ?? 0);

/**
 * A value that already is JSON text (an array, an object or null), put into a row as that JSON rather
 * than as a string holding it: escaped once less on its way to D1, and `json_extract` gives the same
 * text back.
 */
export class JsonText {
  readonly json: string;
  constructor(json: string) {
    this.json = json;
  }
}

const hasJsonText = (item: unknown): item is unknown[] =>
  Array.isArray(item) && item.some((v) => v instanceof JsonText);

/** One item as JSON; a row's `JsonText` values go in as they are. */
const itemJson = (item: unknown): string =>
  hasJsonText(item)
    ? `[${item.map((v) => (v instanceof JsonText ? v.json : (JSON.stringify(v) ?? 'null'))).join(',')}]`
    : JSON.stringify(item);

/** The items as JSON arrays of at most `limit` UTF-8 bytes each (an item larger than that goes alone). */
export function jsonChunks(items: unknown[], limit: number = JSON_PARAM_BYTES): string[] {
  return jsonTextChunks(items.map(itemJson), limit).map((c) => c.json);
}

/** `jsonChunks` of items already made JSON (each a valid JSON text), each chunk with the number it holds. */
export function jsonTextChunks(texts: string[], limit: number = JSON_PARAM_BYTES): { json: string; count: number }[] {
  const out: { json: string; count: number }[] = [];
  let part: string[] = [];
  let size = 2;
  for (const text of texts) {
    const bytes = utf8Bound(text);
    if (part.length && size + bytes + 1 > limit) {
      out.push({ json: `[${part.join(',')}]`, count: part.length });
      part = [];
      size = 2;
    }
    part.push(text);
    size += bytes + 1;
  }
  if (part.length) out.push({ json: `[${part.join(',')}]`, count: part.length });
  return out;
}

/**
 * `json_extract(value, '$[0]') AS a, …`: the columns of one json_each row. Columns in `hex` hold a
 * BLOB as hex text in the JSON (JSON has no bytes): unhex() makes the bytes again.
 */
export const jsonColumns = (names: readonly string[], source = 'value', hex?: ReadonlySet<string>): string =>
  names
    .map((name, i) =>
      hex?.has(name)
        ? `unhex(json_extract(${source}, '$[${i}]')) AS ${name}`
        : `json_extract(${source}, '$[${i}]') AS ${name}`,
    )
    .join(', ');
