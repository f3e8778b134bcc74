/**
 * An email's participants (for the address filters) and the account's contacts, kept by sync: one
 * place for counting up when an email is stored and counting down when it is deleted.
 */
import type { EmailRow } from '../emails/present.ts';
import { normalizeAddress } from '../ingest/parse.ts';
import type { ParsedAddress, ParsedMessage } from '../ingest/types.ts';

/** Participant rows and contact counts of a new email; the account's own addresses are no contacts. */
export function countUpStatements(
  db: D1Database,
  row: EmailRow,
  mail: Pick<ParsedMessage, 'from' | 'to' | 'cc' | 'bcc'>,
  ownAddresses: Set<string>,
): D1PreparedStatement[] {
  const out: D1PreparedStatement[] = [];
  const kinds: [string, ParsedAddress[]][] = [
    ['from', mail.from ? [mail.from] : []],
    ['to', mail.to],
    ['cc', mail.cc],
    ['bcc', mail.bcc],
  ];
  const contacts = new Map<string, string>();
  for (const [kind, list] of kinds) {
    const seen = new Set<string>();
    for (const a of list) {
      const address = normalizeAddress(a.address);
      if (!address || seen.has(address)) continue;
      seen.add(address);
      out.push(
        db
          .prepare('INSERT OR IGNORE INTO email_participants (email_id, account_id, kind, address) VALUES (?, ?, ?, ?)')
          .bind(row.id, row.account_id, kind, address),
      );
      if (ownAddresses.has(address)) continue;
      if (!contacts.has(address) || (a.name && !contacts.get(address))) contacts.set(address, a.name ?? '');
    }
  }
  for (const [address, name] of contacts) {
    out.push(
      db
        .prepare(
          `INSERT INTO contacts (account_id, identifier, display_name, display_name_folded, emails_count, last_email_at, last_email_ms)
           VALUES (?, ?, ?, ?, 1, ?, ?)
           ON CONFLICT (account_id, identifier) DO UPDATE SET
             emails_count = emails_count + 1,
             display_name = CASE WHEN excluded.display_name != '' AND excluded.last_email_ms >= last_email_ms
                                 THEN excluded.display_name ELSE display_name END,
             display_name_folded = CASE WHEN excluded.display_name != '' AND excluded.last_email_ms >= last_email_ms
                                        THEN excluded.display_name_folded ELSE display_name_folded END,
             last_email_at = CASE WHEN excluded.last_email_ms > last_email_ms THEN excluded.last_email_at ELSE last_email_at END,
             last_email_ms = MAX(last_email_ms, excluded.last_email_ms)`,
        )
        .bind(row.account_id, address, name, name.toLowerCase(), row.date, row.date_ms),
    );
  }
  return out;
}

/** A column of the contact's latest email outside the set being deleted (?1), inside an UPDATE of `contacts`. */
const latestRemainingEmail = (column: 'e.date_ms' | 'e.date') =>
  `SELECT ${column} FROM email_participants p JOIN emails e ON e.id = p.email_id
   WHERE p.account_id = contacts.account_id AND p.address = contacts.identifier
     AND e.id NOT IN (SELECT value FROM json_each(?1)) ORDER BY e.date_ms DESC LIMIT 1`;

/** The contacts these emails name (?1: the email ids as a JSON array). */
const NAMED = 'SELECT address FROM email_participants WHERE email_id IN (SELECT value FROM json_each(?1))';

/**
 * Before emails' rows go: their contacts count down (once per email naming them), take the latest
 * date from what remains, and the ones left at zero are dropped. Two statements for any number of
 * emails; they must run before the participant rows are deleted.
 */
/** The two statements of countDownStatements (?1: the email ids as a JSON array, ?2: the account). */
export const COUNT_DOWN_SQL = [
  `UPDATE contacts SET
     emails_count = emails_count - (SELECT COUNT(DISTINCT p.email_id) FROM email_participants p
       WHERE p.account_id = contacts.account_id AND p.address = contacts.identifier
         AND p.email_id IN (SELECT value FROM json_each(?1))),
     last_email_ms = COALESCE((${latestRemainingEmail('e.date_ms')}), last_email_ms),
     last_email_at = COALESCE((${latestRemainingEmail('e.date')}), last_email_at)
   WHERE account_id = ?2 AND identifier IN (${NAMED})`,
  `DELETE FROM contacts WHERE account_id = ?2 AND emails_count <= 0 AND identifier IN (${NAMED})`,
] as const;

export function countDownStatements(db: D1Database, accountId: string, emailIds: string[]): D1PreparedStatement[] {
  const ids = JSON.stringify(emailIds);
  return COUNT_DOWN_SQL.map((sql) => db.prepare(sql).bind(ids, accountId));
}
