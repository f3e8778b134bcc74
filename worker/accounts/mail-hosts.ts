/**
 * What an auth intent may ask the gateway to connect to. The gateway connects wherever the settings
 * say, from inside the operator's network, and the answer tells apart a host that refused from one
 * that timed out: unchecked, the auth intent is a port scanner of that network. So, unless the
 * operator allows it (ALLOW_PRIVATE_MAIL_HOSTS, ALLOW_PLAINTEXT_MAIL: local development):
 * - hosts must be public: no private, loopback, link-local or local-only names or addresses
 *   (judged as written, like webhook URLs: literal addresses in any notation, `localhost` and friends);
 * - encryption `NONE` is refused (the password would cross the network in clear);
 * - every failure to reach a server gets the same answer, whatever the reason.
 */
import type { MailboxConfig } from '../../common/relay.ts';
import type { Env } from '../env.ts';
import { ApiError } from '../lib/errors.ts';
import { canonicalHost, isPrivateHost } from '../../common/hosts.ts';

const enabled = (value: string | undefined) => value === 'true';

/**
 * A private host: written as such in the settings (judged here), or a name the verifying gateway
 * found resolving to a private address (`private_host`, naming the setting): the same answer.
 */
export function privateHostError(setting: string): ApiError {
  const name = setting === 'smtp_host' ? 'smtp_host' : 'imap_host';
  return new ApiError(
    'invalid_parameters',
    `${name}: must be a public host, not a private, loopback or link-local address`,
  );
}

/** 400 naming the first server setting the operator does not allow. */
export function checkMailServers(env: Env, config: MailboxConfig): void {
  for (const service of ['imap', 'smtp'] as const) {
    const server = config[service];
    const host = canonicalHost(server.host);
    if (!host) throw new ApiError('invalid_parameters', `${service}_host: must be a host name or an IP address`);
    if (!enabled(env.ALLOW_PRIVATE_MAIL_HOSTS) && isPrivateHost(host)) throw privateHostError(`${service}_host`);
    if (!enabled(env.ALLOW_PLAINTEXT_MAIL) && server.encryption === 'NONE') {
      throw new ApiError(
        'invalid_parameters',
        `${service}_encryption: NONE would send the password unencrypted; use SSL or STARTTLS`,
      );
    }
  }
}

/** The gateway's "IMAP host:port: <what happened>" for a server it could not talk to. */
const UNREACHABLE = /^(IMAP|SMTP) (\S+): /;

/**
 * One answer for every server that could not be reached (refused, timed out, unknown name, TLS
 * failure, not a mail server): the reason would tell a scanner what listens where.
 */
export function sameUnreachableError(err: unknown): unknown {
  if (!(err instanceof ApiError) || err.kind !== 'provider_error') return err;
  const match = UNREACHABLE.exec(err.detail);
  if (!match) return err;
  return new ApiError(
    'provider_error',
    `${match[1]} ${match[2]}: could not connect (no answer, refused, or not a mail server speaking the chosen encryption)`,
  );
}
