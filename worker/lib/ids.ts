/**
 * Typed ids: a prefix and 26 characters of Crockford base32, ULID-like (48-bit millisecond
 * time + 80 random bits), so ids sort by creation time. One parser for every id the API accepts.
 */

export const ID_PREFIXES = {
  account: 'acc_',
  email: 'email_',
  attachment: 'att_',
  folder: 'fld_',
  draft: 'drf_',
  endpoint: 'we_',
  event: 'evt_',
  apiKey: 'pk_',
  tracking: 'trk_',
  thread: 'thr_',
  conversation: 'wc_',
  scheduled: 'sch_',
} as const;

export type IdKind = keyof typeof ID_PREFIXES;

const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const BODY = /^[0-9A-HJKMNP-TV-Z]{26}$/;

export function encodeBase32(bytes: Uint8Array): string {
  let out = '';
  let buffer = 0;
  let bits = 0;
  for (const byte of bytes) {
    buffer = (buffer << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      out += ALPHABET[(buffer >>> bits) & 31];
    }
    buffer &= (1 << bits) - 1;
  }
  if (bits > 0) out += ALPHABET[(buffer << (5 - bits)) & 31];
  return out;
}

/** 26 chars: 10 for the time (48 bits), 16 for 80 random bits. */
function idBody(now: number): string {
  let time = '';
  let t = now;
  for (let i = 0; i < 10; i++) {
    time = ALPHABET[t % 32] + time;
    t = Math.floor(t / 32);
  }
  return time + encodeBase32(crypto.getRandomValues(new Uint8Array(10)));
}

export function newId(kind: IdKind, now: number = Date.now()): string {
  return ID_PREFIXES[kind] + idBody(now);
}

/** The id if it is well-formed and of the given kind, else null (callers answer 404 or "nothing found"). */
export function parseId(kind: IdKind, value: string | null | undefined): string | null {
  if (typeof value !== 'string') return null;
  const prefix = ID_PREFIXES[kind];
  if (!value.startsWith(prefix)) return null;
  return BODY.test(value.slice(prefix.length)) ? value : null;
}

/**
 * A deterministic id of the given kind derived from a stable key (e.g. a Gmail thread id), so that
 * the same key always maps to the same id without a lookup.
 */
export async function derivedId(kind: IdKind, key: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(key)));
  return ID_PREFIXES[kind] + encodeBase32(digest.slice(0, 17)).slice(0, 26);
}
