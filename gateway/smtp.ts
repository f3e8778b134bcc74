/** SMTP connection options and the login check of the auth intent; sending itself uses them (mailbox.ts). */
import type { ServerConfig } from '../common/relay.ts';

/**
 * nodemailer, loaded on the first verify, send or draft: a gateway that only holds idle accounts
 * never loads it (about 6 MiB of RSS; scripts/gateway.mjs leaves it out of the bundle).
 */
export async function loadNodemailer() {
  return (await import('nodemailer')).default;
}

export async function loadMailComposer() {
  return (await import('nodemailer/lib/mail-composer')).default;
}

export function smtpOptions(server: ServerConfig, timeoutMs: number) {
  return {
    host: server.host,
    port: server.port,
    secure: server.encryption === 'SSL',
    requireTLS: server.encryption === 'STARTTLS',
    ignoreTLS: server.encryption === 'NONE',
    auth: { user: server.user, pass: server.password },
    connectionTimeout: timeoutMs,
    greetingTimeout: timeoutMs,
    socketTimeout: timeoutMs * 2,
    logger: false,
  };
}

/** Connects, upgrades to TLS as configured and logs in (nodemailer's `verify()`); throws on failure. */
export async function verifySmtp(server: ServerConfig, timeoutMs: number): Promise<void> {
  const nodemailer = await loadNodemailer();
  const transport = nodemailer.createTransport(smtpOptions(server, timeoutMs));
  try {
    await transport.verify();
  } finally {
    transport.close();
  }
}
