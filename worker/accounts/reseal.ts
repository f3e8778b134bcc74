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

/** Secrets sealed again per run, per table and kind (previous key, older format): 100 writes at most. */
const RESEAL_LIMIT = 25;

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
  // What the previous key sealed, then values of the older format that name no key. The older ones
  // are taken in a random order: some may be sealed with a key that is gone (neither opens them),
  // and a fixed order would pick those same rows every run. A value sealed with a third key of the
  // newer format is never picked.
  const previous = await sealedWithPattern(keys.previous);
  const tables = [
    {
      select: 'SELECT id, credentials AS sealed FROM accounts WHERE credentials LIKE ?',
      context: credentialsContext,
      write: (row: Sealed, sealed: string) => resealCredentials(env.DB, row.id, row.sealed, sealed),
      count: 'accounts' as const,
    },
    {
      select: 'SELECT id, secret AS sealed FROM webhook_endpoints WHERE secret LIKE ?',
      context: secretContext,
      write: (row: Sealed, sealed: string) =>
        env.DB.prepare('UPDATE webhook_endpoints SET secret = ? WHERE id = ? AND secret = ?')
          .bind(sealed, row.id, row.sealed)
          .run(),
      count: 'endpoints' as const,
    },
  ];
  for (const table of tables) {
    const [ofPrevious, ofOlderFormat] = await env.DB.batch<Sealed>([
      env.DB.prepare(`${table.select} LIMIT ?`).bind(previous, RESEAL_LIMIT),
      env.DB.prepare(`${table.select} ORDER BY random() LIMIT ?`).bind('v1.%', RESEAL_LIMIT),
    ]);
    for (const row of [...ofPrevious!.results, ...ofOlderFormat!.results]) {
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
