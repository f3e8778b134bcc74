/**
 * Mailbox passwords at rest: AES-256-GCM with CREDENTIALS_KEY, bound to the account id. Passwords
 * sealed with CREDENTIALS_KEY_PREVIOUS (a rotation) are sealed again with the current key when they
 * are opened, and by the minute sweep (reseal.ts).
 */
import type { Env } from '../env.ts';
import { encryptSecret, openSecret, secretKeys } from '../lib/crypto.ts';
import { directoryDb } from '../shards/registry.ts';

export interface MailboxPasswords {
  imap_password: string;
  smtp_password: string;
}

export const credentialsContext = (accountId: string) => `account-credentials:${accountId}`;

export function sealPasswords(env: Env, accountId: string, passwords: MailboxPasswords): Promise<string> {
  return encryptSecret(secretKeys(env), JSON.stringify(passwords), credentialsContext(accountId));
}

/** The passwords; sealed again with the current key first when an older key sealed them. */
export async function openPasswords(env: Env, accountId: string, sealed: string): Promise<MailboxPasswords> {
  const keys = secretKeys(env);
  const { plaintext, stale } = await openSecret(keys, sealed, credentialsContext(accountId));
  if (stale)
    await resealCredentials(
      directoryDb(env),
      accountId,
      sealed,
      await encryptSecret(keys, plaintext, credentialsContext(accountId)),
    );
  return JSON.parse(plaintext) as MailboxPasswords;
}

/** Replaces the sealed passwords unless they changed meanwhile (a reconnect wrote new ones). */
export async function resealCredentials(db: D1Database, accountId: string, old: string, sealed: string): Promise<void> {
  await db
    .prepare('UPDATE accounts SET credentials = ? WHERE id = ? AND credentials = ?')
    .bind(sealed, accountId, old)
    .run();
}
