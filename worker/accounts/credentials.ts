/** Mailbox passwords at rest: AES-256-GCM with CREDENTIALS_KEY, bound to the account id. */
import type { Env } from '../env.ts';
import { decryptSecret, encryptSecret } from '../lib/crypto.ts';

export interface MailboxPasswords {
  imap_password: string;
  smtp_password: string;
}

const context = (accountId: string) => `account-credentials:${accountId}`;

export function sealPasswords(env: Env, accountId: string, passwords: MailboxPasswords): Promise<string> {
  return encryptSecret(env.CREDENTIALS_KEY, JSON.stringify(passwords), context(accountId));
}

export async function openPasswords(env: Env, accountId: string, sealed: string): Promise<MailboxPasswords> {
  return JSON.parse(await decryptSecret(env.CREDENTIALS_KEY, sealed, context(accountId))) as MailboxPasswords;
}
