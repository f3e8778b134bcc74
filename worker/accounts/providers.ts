/** Server settings of well-known providers, so a client can connect with just an address and a password. */
import type { Encryption } from '../../common/relay.ts';

export interface ServerDefaults {
  imap: { host: string; port: number; encryption: Encryption };
  smtp: { host: string; port: number; encryption: Encryption };
}

const table = (imap: string, smtp: string, smtpPort = 465): ServerDefaults => ({
  imap: { host: imap, port: 993, encryption: 'SSL' },
  smtp: { host: smtp, port: smtpPort, encryption: smtpPort === 465 ? 'SSL' : 'STARTTLS' },
});

const KNOWN: Record<string, ServerDefaults> = {
  'gmail.com': table('imap.gmail.com', 'smtp.gmail.com'),
  'googlemail.com': table('imap.gmail.com', 'smtp.gmail.com'),
  'outlook.com': table('outlook.office365.com', 'smtp.office365.com', 587),
  'hotmail.com': table('outlook.office365.com', 'smtp.office365.com', 587),
  'yahoo.com': table('imap.mail.yahoo.com', 'smtp.mail.yahoo.com'),
  'icloud.com': table('imap.mail.me.com', 'smtp.mail.me.com', 587),
  'me.com': table('imap.mail.me.com', 'smtp.mail.me.com', 587),
  'fastmail.com': table('imap.fastmail.com', 'smtp.fastmail.com'),
  'zoho.com': table('imap.zoho.com', 'smtp.zoho.com'),
  'aol.com': table('imap.aol.com', 'smtp.aol.com'),
};

/** Defaults for the address's domain (gmx.* included), or null when the provider is not known. */
export function providerDefaults(email: string): ServerDefaults | null {
  const domain = email.split('@').pop()?.toLowerCase() ?? '';
  if (KNOWN[domain]) return KNOWN[domain];
  if (/^gmx\.[a-z.]+$/.test(domain)) return table('imap.gmx.net', 'mail.gmx.net');
  return null;
}

/** SSL for port 993/465, STARTTLS otherwise (DECISIONS.md). */
export const defaultEncryption = (port: number): Encryption => (port === 993 || port === 465 ? 'SSL' : 'STARTTLS');
