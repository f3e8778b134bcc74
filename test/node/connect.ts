/** Connecting a test mailbox (test/mailserver) to the service through POST /auth/intent. */
import type { MailServerInfo } from '../mailserver/client.ts';
import { eventually, type Service } from './service.ts';

/** The auth intent body for a test user: IMAPS and SMTP submission with STARTTLS on the test server. */
export function mailboxIntent(
  mail: MailServerInfo,
  name: string,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  const u = mail.users.find((x) => x.user === name);
  if (!u) throw new Error(`no test user ${name}`);
  return {
    provider: 'imap',
    email: u.email,
    password: u.password,
    imap_user: u.user,
    imap_host: mail.host,
    imap_port: mail.imapPort,
    imap_encryption: 'SSL',
    smtp_host: mail.host,
    smtp_port: mail.smtpPort,
    smtp_encryption: 'STARTTLS',
    ...extra,
  };
}

/** Connects once a gateway answers, and waits until a gateway holds the account's lease. */
export async function connectMailbox(
  service: Service,
  mail: MailServerInfo,
  name: string,
  extra: Record<string, unknown> = {},
): Promise<{ id: string; email: string }> {
  const account = await eventually(
    async () => {
      const res = await service.api('POST', '/auth/intent', mailboxIntent(mail, name, extra));
      return res.status === 200 ? (res.body as { id: string; email: string }) : null;
    },
    { what: `connecting ${name}`, timeoutMs: 90_000, intervalMs: 500 },
  );
  // Commands go to the gateway holding the account: wait for its lease.
  await eventually(
    () =>
      service
        .query<{ gateway_id: string | null }>('SELECT gateway_id FROM accounts WHERE id = ?', account.id)
        .some((row) => row.gateway_id),
    { what: 'the lease', timeoutMs: 30_000 },
  );
  return account;
}
