/**
 * Key rotation: while CREDENTIALS_KEY_PREVIOUS is set, the minute sweep seals again with the current
 * CREDENTIALS_KEY a bounded number of mailbox passwords and webhook endpoint secrets that an older key
 * sealed (opening them also does it for passwords, credentials.ts). Once a run finds none left, the
 * previous key can be removed (docs/security.md, "Rotating CREDENTIALS_KEY").
 */
import type { Env } from '../env.ts';
import { encryptSecret, openSecret, sealedWithPattern, secretKeys } from '../lib/crypto.ts';
import { secretContext } from '../webhooks/signing.ts';
import { credentialsContext, resealCredentials } from './credentials.ts';

/** Secrets sealed again per run, per table: a few dozen D1 queries at most. */
const RESEAL_LIMIT = 50;

export interface ResealReport {
  accounts: number;
  endpoints: number;
  /** Rows neither key opens (sealed with a key that is gone): left as they are. */
  unreadable: number;
}

interface Sealed {
  id: string;
  sealed: string;
}

export async function resealStale(env: Env): Promise<ResealReport> {
  const report: ResealReport = { accounts: 0, endpoints: 0, unreadable: 0 };
  const keys = secretKeys(env);
  if (!keys.previous) return report;
  // What the previous key sealed, and the older values that name no key; a value sealed with a third
  // key (neither opens it) is never picked, so it cannot hold the sweep up.
  const previous = await sealedWithPattern(keys.previous);
  const tables = [
    {
      sql: `SELECT id, credentials AS sealed FROM accounts
            WHERE credentials LIKE ? OR credentials LIKE 'v1.%' LIMIT ?`,
      context: credentialsContext,
      write: (row: Sealed, sealed: string) => resealCredentials(env.DB, row.id, row.sealed, sealed),
      count: 'accounts' as const,
    },
    {
      sql: `SELECT id, secret AS sealed FROM webhook_endpoints WHERE secret LIKE ? OR secret LIKE 'v1.%' LIMIT ?`,
      context: secretContext,
      write: (row: Sealed, sealed: string) =>
        env.DB.prepare('UPDATE webhook_endpoints SET secret = ? WHERE id = ? AND secret = ?')
          .bind(sealed, row.id, row.sealed)
          .run(),
      count: 'endpoints' as const,
    },
  ];
  for (const table of tables) {
    const { results } = await env.DB.prepare(table.sql).bind(previous, RESEAL_LIMIT).all<Sealed>();
    for (const row of results) {
      try {
        const { plaintext } = await openSecret(keys, row.sealed, table.context(row.id));
        await table.write(row, await encryptSecret(keys, plaintext, table.context(row.id)));
        report[table.count] += 1;
      } catch {
        report.unreadable += 1;
      }
    }
  }
  if (report.unreadable > 0)
    console.error(
      `key rotation: ${report.unreadable} sealed secrets open with neither CREDENTIALS_KEY nor CREDENTIALS_KEY_PREVIOUS`,
    );
  return report;
}
