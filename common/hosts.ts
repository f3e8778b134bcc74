/**
 * Which host names and addresses are not the public internet: private, loopback, link-local,
 * multicast and reserved ranges, names that never leave the local network, single-label names, and
 * IPv6 forms that carry such an IPv4 address or reach one through a translator. Used by the webhook
 * URL guard, by the auth intent's mail host guard (names as written) and by the gateway, which judges
 * the addresses a mail host resolves to at every connect (gateway/mail-hosts.ts).
 */

/** Names that never leave the local network (RFC 6761, RFC 6762, RFC 8375, ICANN's .internal). */
const PRIVATE_NAME = /(^|\.)(localhost|local|internal|home\.arpa)$/;

/** IPv4 ranges that are not the public internet: [first address, prefix length]. */
const PRIVATE_V4: [string, number][] = [
  ['0.0.0.0', 8], // "this" network
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local (cloud metadata lives here)
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15], // benchmarking
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
];

function v4ToNumber(address: string): number | null {
  const parts = address.split('.');
  if (parts.length !== 4 || parts.some((p) => !/^\d{1,3}$/.test(p) || Number(p) > 255)) return null;
  return parts.reduce((acc, p) => acc * 256 + Number(p), 0);
}

function isPrivateV4(value: number): boolean {
  return PRIVATE_V4.some(([base, bits]) => {
    const size = 2 ** (32 - bits);
    return Math.floor(value / size) === Math.floor(v4ToNumber(base)! / size);
  });
}

/** The eight 16-bit groups of an IPv6 address as the URL parser writes it (compressed, hex, no dotted tail). */
function v6Groups(address: string): number[] | null {
  const halves = address.split('::');
  if (halves.length > 2) return null;
  const parse = (part: string | undefined) => (part ? part.split(':').map((g) => parseInt(g, 16)) : []);
  const head = parse(halves[0]);
  const tail = parse(halves[1]);
  const groups = halves.length === 2 ? [...head, ...Array(8 - head.length - tail.length).fill(0), ...tail] : head;
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : null;
}

function isPrivateV6(groups: number[]): boolean {
  const [g0 = 0, g1 = 0, g2 = 0, , , g5 = 0, g6 = 0, g7 = 0] = groups;
  const allZeroUpTo = (n: number) => groups.slice(0, n).every((g) => g === 0);
  if (allZeroUpTo(8)) return true; // ::
  if (allZeroUpTo(7) && g7 === 1) return true; // ::1
  if ((g0 & 0xfe00) === 0xfc00) return true; // fc00::/7 unique local
  if ((g0 & 0xffc0) === 0xfe80) return true; // fe80::/10 link-local
  if ((g0 & 0xffc0) === 0xfec0) return true; // fec0::/10 site-local (deprecated, still routed inside sites)
  if ((g0 & 0xff00) === 0xff00) return true; // multicast
  // NAT64 (64:ff9b::/96 well-known, 64:ff9b:1::/48 local use) and 6to4 (2002::/16) reach IPv4
  // hosts through a translator or relay the operator does not control: refused whole.
  if (g0 === 0x64 && g1 === 0xff9b && (g2 === 0 || g2 === 1)) return true;
  if (g0 === 0x2002) return true;
  // ::ffff:a.b.c.d (IPv4-mapped) and ::a.b.c.d (IPv4-compatible) carry an IPv4 address.
  if (allZeroUpTo(5) && (g5 === 0xffff || g5 === 0)) return isPrivateV4(g6 * 65536 + g7);
  return false;
}

/**
 * `hostname` as the URL parser gives it (lower case, IPv4 in dotted decimal, IPv6 in brackets).
 * A malformed bracketed address counts as private.
 */
export function isPrivateHost(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/\.$/, '');
  if (host.startsWith('[')) {
    const groups = v6Groups(host.slice(1, -1));
    return groups === null || isPrivateV6(groups);
  }
  const v4 = v4ToNumber(host);
  if (v4 !== null) return isPrivateV4(v4);
  return PRIVATE_NAME.test(host) || !host.includes('.');
}

/**
 * A bare host as a user types it (`mail.example.com`, `10.0.0.1`, `::1`, `[::1]`, `0x7f.1`) in the
 * URL parser's canonical form, or null when it is not a valid host.
 */
export function canonicalHost(raw: string): string | null {
  const host = raw.includes(':') && !raw.startsWith('[') ? `[${raw}]` : raw;
  try {
    const url = new URL(`http://${host}/`);
    return url.host === url.hostname ? url.hostname : null; // a port or other trailing part is not a host
  } catch {
    return null;
  }
}
