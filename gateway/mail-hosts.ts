/**
 * Mail hosts are judged by address, at every connect. The gateway resolves the host itself, refuses
 * it when any address it resolves to is private, loopback, link-local, unique-local, multicast or
 * unspecified (IPv4, IPv6 and the IPv6 forms that carry IPv4; common/hosts.ts) unless
 * ALLOW_PRIVATE_MAIL_HOSTS is set, and then connects to the very address it checked: no second
 * lookup, so a DNS answer that changes in between (rebinding) cannot send the connection elsewhere.
 * TLS still checks the certificate against the host name (`servername`).
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { canonicalHost, isPrivateHost } from '../common/hosts.ts';

/** The addresses a host name resolves to. */
export type Resolver = (host: string) => Promise<string[]>;

const systemResolver: Resolver = async (host) =>
  (await lookup(host, { all: true, verbatim: true })).map((entry) => entry.address);

const policy: { allowPrivate: boolean; resolve: Resolver } = { allowPrivate: false, resolve: systemResolver };

/** Set once at start (config.ts); a test may give its own resolver. */
export function configureMailHosts(options: { allowPrivate: boolean; resolve?: Resolver }): void {
  policy.allowPrivate = options.allowPrivate;
  policy.resolve = options.resolve ?? systemResolver;
}

/** A mail host that resolves to an address the gateway must not connect to. */
export class MailHostRefused extends Error {
  readonly code = 'EMAILHOSTREFUSED';
}

function isPrivateAddress(address: string): boolean {
  const host = canonicalHost(address);
  return host === null || isPrivateHost(host);
}

/** Where to connect for a host: its checked address, and the name TLS must verify (none for an address). */
export interface MailHostTarget {
  address: string;
  servername?: string;
}

export async function mailHostTarget(host: string): Promise<MailHostTarget> {
  const addresses = isIP(host) ? [host] : await policy.resolve(host);
  if (addresses.length === 0) throw Object.assign(new Error(`${host}: no address`), { code: 'ENOTFOUND' });
  if (!policy.allowPrivate) {
    const refused = addresses.find(isPrivateAddress);
    if (refused) throw new MailHostRefused(`${host} resolves to ${refused}, a private address`);
  }
  return { address: addresses[0]!, ...(isIP(host) ? {} : { servername: host }) };
}
