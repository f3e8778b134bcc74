/** SMTP connection options and the login check of the auth intent; sending itself uses them (mailbox.ts). */
import nodemailer from 'nodemailer';
import type { ServerConfig } from '../common/relay.ts';

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
  const transport = nodemailer.createTransport(smtpOptions(server, timeoutMs));
  try {
    await transport.verify();
  } finally {
    transport.close();
  }
}
