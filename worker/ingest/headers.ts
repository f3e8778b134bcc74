/** Raw RFC 822 header handling that does not depend on a MIME parser succeeding. */

import { decodeWords } from 'postal-mime';

export interface RawHeader {
  name: string;
  /** Unfolded, not yet RFC 2047-decoded: address and id headers must be tokenised before decoding. */
  raw: string;
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/** Bytes as a string, UTF-8 when they are valid UTF-8, else Latin-1 (which never fails). */
export function decodeBytes(bytes: Uint8Array): string {
  try {
    return utf8.decode(bytes);
  } catch {
    return latin1(bytes);
  }
}

export function latin1(bytes: Uint8Array): string {
  let out = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    out += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return out;
}

/** Offset where the body starts (after the first empty line), or the length when there is none. */
export function headerEnd(bytes: Uint8Array): { headerLength: number; bodyStart: number } {
  for (let i = 0; i < bytes.length; i++) {
    if (bytes[i] !== 0x0a) continue;
    if (i === 0) return { headerLength: 0, bodyStart: 1 };
    const next = bytes[i + 1];
    if (next === 0x0a) return { headerLength: i + 1, bodyStart: i + 2 };
    if (next === 0x0d && bytes[i + 2] === 0x0a) return { headerLength: i + 1, bodyStart: i + 3 };
  }
  return { headerLength: bytes.length, bodyStart: bytes.length };
}

const HEADER_NAME = /^[!-9;-~]+$/;

/** Parses a header block: unfolds continuation lines and skips lines that are not `Name: value`. */
export function parseHeaderBlock(bytes: Uint8Array): RawHeader[] {
  const headers: RawHeader[] = [];
  let current: { name: string; lines: string[] } | null = null;
  const flush = () => {
    if (current) headers.push({ name: current.name, raw: decodeBytes(binaryToBytes(current.lines.join(''))).trim() });
  };
  // Work on a Latin-1 view so every byte survives; each value is re-decoded on its own, because
  // one header in UTF-8 next to one in Latin-1 is common in real mail.
  for (const line of latin1(bytes).split(/\r?\n/)) {
    if (/^[ \t]/.test(line)) {
      current?.lines.push(line);
      continue;
    }
    const colon = line.indexOf(':');
    const name = colon > 0 ? line.slice(0, colon).trimEnd() : '';
    flush();
    current = HEADER_NAME.test(name) ? { name, lines: [line.slice(colon + 1)] } : null;
  }
  flush();
  return headers;
}

function binaryToBytes(text: string): Uint8Array {
  const out = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i);
  return out;
}

/** RFC 2047 decoding that never throws (postal-mime falls back on its own for unknown charsets). */
export function decodeHeaderValue(raw: string): string {
  try {
    return decodeWords(raw);
  } catch {
    return raw;
  }
}

export function firstHeader(headers: RawHeader[], name: string): string | null {
  const lower = name.toLowerCase();
  return headers.find((h) => h.name.toLowerCase() === lower)?.raw ?? null;
}

export function allHeaders(headers: RawHeader[], name: string): string[] {
  const lower = name.toLowerCase();
  return headers.filter((h) => h.name.toLowerCase() === lower).map((h) => h.raw);
}

/** `<id>` tokens of a Message-ID / In-Reply-To / References value, angle brackets kept. */
export function messageIds(value: string | null): string[] {
  if (!value) return [];
  const ids = value.match(/<[^<>\s]+>/g);
  if (ids) return ids;
  // Some mailers write ids without brackets; keep them comparable with bracketed ones.
  const bare = value.trim().split(/\s+/)[0];
  return bare?.includes('@') ? [`<${bare}>`] : [];
}

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const ZONES: Record<string, number> = {
  ut: 0,
  utc: 0,
  gmt: 0,
  z: 0,
  est: -500,
  edt: -400,
  cst: -600,
  cdt: -500,
  mst: -700,
  mdt: -600,
  pst: -800,
  pdt: -700,
};

/**
 * Parses an RFC 5322 date (plus the obsolete forms seen in old mail: two-digit years, named zones,
 * asctime order, missing seconds). Returns null for anything it cannot read with confidence, rather
 * than trusting Date.parse, which turns strings like "1" into a real instant.
 */
export function parseDate(value: string | null): number | null {
  if (!value) return null;
  const text = value
    .replace(/\([^)]*\)/g, ' ')
    .replace(/\s+/g, ' ')
    .trim()
    .toLowerCase();
  const month = '(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\\.?';
  const time = '(\\d{1,2}):(\\d{1,2})(?::(\\d{1,2}))?';
  const zone = '(?:\\s*([+-]\\d{4}|[a-z]{1,5}))?';
  let m = new RegExp(`(\\d{1,2})[ -]${month}[ -](\\d{2,4}),? ${time}${zone}`).exec(text);
  if (m) return toMs(m[3]!, m[2]!, m[1]!, m[4]!, m[5]!, m[6], m[7]);
  m = new RegExp(`${month} (\\d{1,2}) ${time} (\\d{4})${zone}`).exec(text); // asctime
  if (m) return toMs(m[6]!, m[1]!, m[2]!, m[3]!, m[4]!, m[5], m[7]);
  if (/^\d{4}-\d{2}-\d{2}[t ]\d{2}:\d{2}/.test(text)) {
    const ms = Date.parse(text.toUpperCase().replace(' ', 'T'));
    return Number.isFinite(ms) ? ms : null;
  }
  return null;
}

function toMs(
  yearText: string,
  monthText: string,
  dayText: string,
  hourText: string,
  minuteText: string,
  secondText: string | undefined,
  zoneText: string | undefined,
): number | null {
  let year = Number(yearText);
  if (yearText.length <= 2) year += year < 50 ? 2000 : 1900;
  else if (yearText.length === 3) year += 1900;
  const month = MONTHS.indexOf(monthText.slice(0, 3));
  const [day, hour, minute, second] = [dayText, hourText, minuteText, secondText ?? '0'].map(Number) as [
    number,
    number,
    number,
    number,
  ];
  if (day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) return null;
  let offset = 0; // as ±hhmm
  if (zoneText && /^[+-]\d{4}$/.test(zoneText)) offset = Number(zoneText);
  else if (zoneText && zoneText in ZONES) offset = ZONES[zoneText]!;
  const sign = offset < 0 ? -1 : 1;
  const offsetMinutes = sign * (Math.floor(Math.abs(offset) / 100) * 60 + (Math.abs(offset) % 100));
  const ms = Date.UTC(year, month, day, hour, minute, Math.min(second, 59)) - offsetMinutes * 60_000;
  return Number.isFinite(ms) ? ms : null;
}

/**
 * Old Mac mail uses CR alone as the line break, which postal-mime (LF-based) would read as one
 * endless header line. Bare CR → LF keeps every offset, so this is a byte-for-byte replacement.
 */
export function normalizeLineEndings(bytes: Uint8Array): Uint8Array {
  const probe = bytes.subarray(0, 65536);
  let bareCr = 0;
  let lf = 0;
  for (let i = 0; i < probe.length; i++) {
    if (probe[i] === 0x0a) lf++;
    else if (probe[i] === 0x0d && probe[i + 1] !== 0x0a) bareCr++;
  }
  if (bareCr <= lf) return bytes;
  const out = bytes.slice();
  for (let i = 0; i < out.length; i++) {
    if (out[i] === 0x0d && out[i + 1] !== 0x0a) out[i] = 0x0a;
  }
  return out;
}

/** The header block as an email presents it: each header unfolded, its value RFC 2047-decoded. */
export function presentedHeaders(headers: RawHeader[]): { name: string; value: string }[] {
  return headers.map((h) => ({ name: h.name, value: decodeHeaderValue(h.raw) }));
}

/**
 * The presented headers of a source read from its start (the whole source, or its first
 * `header_length` bytes as sync recorded them): what parsing the whole source gives, when the check
 * at sync (sync/email-row.ts) found them equal.
 */
export function sourceHeaders(start: Uint8Array): { name: string; value: string }[] {
  const bytes = normalizeLineEndings(start);
  return presentedHeaders(parseHeaderBlock(bytes.subarray(0, headerEnd(bytes).headerLength)));
}
