/**
 * Paging shared by every list. Offset lists: `limit` (1..250, default 100) and `offset` (>= 0).
 * Cursor lists: `limit` and an opaque `cursor` that encodes the last position seen and is bound to
 * the filters it was issued for (reusing it with other filters is a 400).
 */
import { z } from 'zod';
import { fromBase64Url, toBase64Url } from './crypto.ts';
import { ApiError } from './errors.ts';
import { intParam } from './validation.ts';

export const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 250;

export const limitParam = intParam(1, MAX_LIMIT).default(DEFAULT_LIMIT);

export const offsetPaging = z.object({
  limit: limitParam,
  offset: intParam(0).default(0),
});

export const cursorPaging = z.object({
  limit: limitParam,
  cursor: z.string().min(1, 'must not be empty').optional(),
});

export interface OffsetList<T> {
  object: string;
  data: T[];
  has_more: boolean;
}

export interface CursorList<T> extends OffsetList<T> {
  cursor: string | null;
}

/** Rows were fetched with `LIMIT limit + 1`: the extra row only tells whether there is more. */
export function offsetList<T>(object: string, rows: T[], limit: number): OffsetList<T> {
  return { object, data: rows.slice(0, limit), has_more: rows.length > limit };
}

export type CursorPosition = (string | number)[];

/**
 * Rows were fetched with `LIMIT limit + 1` after the position in the cursor; `positionOf` gives the
 * keyset position of a row (for example `[date_ms, id]`).
 */
export function cursorList<T, R>(
  object: string,
  rows: R[],
  limit: number,
  filtersKey: string,
  positionOf: (row: R) => CursorPosition,
  present: (row: R) => T,
): CursorList<T> {
  const page = rows.slice(0, limit);
  const hasMore = rows.length > limit;
  const last = page[page.length - 1];
  return {
    object,
    data: page.map(present),
    has_more: hasMore,
    cursor: hasMore && last !== undefined ? encodeCursor(positionOf(last), filtersKey) : null,
  };
}

/** A short, stable fingerprint of the filters (FNV-1a, hex): enough to notice a mismatch. */
function fingerprint(text: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash.toString(16);
}

export function encodeCursor(position: CursorPosition, filtersKey: string): string {
  return toBase64Url(new TextEncoder().encode(JSON.stringify({ p: position, f: fingerprint(filtersKey) })));
}

/** The position inside a cursor, or a 400 if it is not one of ours or belongs to other filters. */
export function decodeCursor(cursor: string, filtersKey: string): CursorPosition {
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(fromBase64Url(cursor)));
  } catch {
    throw new ApiError('invalid_parameters', 'cursor: not a cursor returned by this API');
  }
  const shape = z.object({ p: z.array(z.union([z.string(), z.number()])).min(1), f: z.string() });
  const result = shape.safeParse(parsed);
  if (!result.success) throw new ApiError('invalid_parameters', 'cursor: not a cursor returned by this API');
  if (result.data.f !== fingerprint(filtersKey)) {
    throw new ApiError(
      'invalid_parameters',
      'cursor: it was issued for different filters; pass the same filters as the request that returned it',
    );
  }
  return result.data.p;
}
