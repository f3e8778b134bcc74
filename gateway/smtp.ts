/** nodemailer and its SMTP connection options, for sends and drafts (mailbox.ts); verify logs in without it (smtp-login.ts). */
import type { ServerConfig } from '../common/relay.ts';
import type { MailHostTarget } from './mail-hosts.ts';

/**
 * nodemailer, loaded on the first send or draft: a gateway that only holds idle accounts
 * never loads it (about 6 MiB of RSS; scripts/gateway.mjs leaves it out of the bundle).
 */
export async function loadNodemailer() {
  return (await import('nodemailer')).default;
}

export async function loadMailComposer() {
  return (await import('nodemailer/lib/mail-composer')).default;
}

/** Options for a connection to `target`, the address `server.host` was judged by (mail-hosts.ts). */
export function smtpOptions(server: ServerConfig, target: MailHostTarget, timeoutMs: number) {
  return {
    host: target.address,
    ...(target.servername ? { servername: target.servername } : {}),
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

/**
 * Tells whether the current send reached its DATA phase, from nodemailer's transaction log (the
 * commands only; nothing of it is kept). nodemailer labels every socket timeout or reset `CONN`
 * whatever the stage, so the stage is watched here: a link lost before DATA handed nothing over;
 * after it, the server may have taken the message.
 */
export class DataPhaseWatch {
  begun = false;
  readonly logger = Object.fromEntries(
    ['trace', 'debug', 'info', 'warn', 'error', 'fatal'].map((level) => [
      level,
      (entry: { tnx?: unknown } | undefined, message?: unknown) => {
        if (entry?.tnx === 'client' && /^(DATA|BDAT)\b/i.test(String(message ?? ''))) this.begun = true;
      },
    ]),
  );
}
