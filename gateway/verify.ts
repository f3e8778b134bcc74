/** The `verify` request: log in to IMAP and SMTP with new settings and answer with the folder list. */
import type { MailboxConfig, VerifyResult } from '../common/relay.ts';
import { DEFAULT_SYNC } from './config.ts';
import { classifyError, GatewayError } from './errors.ts';
import { imapOptions, listFolders, openImap } from './imap.ts';
import { countFailure } from './metrics.ts';
import { MailHostRefused } from './mail-hosts.ts';
import { checkSmtpLogin } from './smtp-login.ts';

async function verifyImap(config: MailboxConfig, timeoutMs: number) {
  const client = await openImap(imapOptions(config.imap, { timeoutMs }, { disableAutoIdle: true }));
  try {
    return await listFolders(client);
  } finally {
    await client.logout().catch(() => client.close());
  }
}

/**
 * Throws a GatewayError: `private_host` when a host resolves to an address the gateway may not
 * connect to (the Worker answers as for that address written in the settings: nothing was tried,
 * so nothing about what listens there is told), `invalid_credentials` when a server refused the
 * login, `provider_error` when it could not be reached (refused, DNS, timeout, TLS). IMAP's failure
 * wins when both fail of the same kind.
 */
export async function verifyMailbox(
  config: MailboxConfig,
  timeoutMs = DEFAULT_SYNC.connectTimeoutMs,
): Promise<VerifyResult> {
  const [imap, smtp] = await Promise.allSettled([
    verifyImap(config, timeoutMs),
    checkSmtpLogin(config.smtp, timeoutMs),
  ]);
  for (const login of [imap, smtp]) if (login.status === 'rejected') countFailure(login.reason);
  if (imap.status === 'rejected' && imap.reason instanceof MailHostRefused)
    throw new GatewayError('private_host', 'imap_host');
  if (smtp.status === 'rejected' && smtp.reason instanceof MailHostRefused)
    throw new GatewayError('private_host', 'smtp_host');
  if (imap.status === 'rejected') throw classifyError(imap.reason, 'IMAP', config.imap.host, config.imap.port);
  if (smtp.status === 'rejected') throw classifyError(smtp.reason, 'SMTP', config.smtp.host, config.smtp.port);
  return { folders: imap.value };
}
