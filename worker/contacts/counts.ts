/**
 * An email's participants (for the address filters) and the account's contacts, kept by sync: one
 * place for counting up when an email is stored and counting down when it is deleted.
 */
import type { EmailRow } from '../emails/present.ts';
import { normalizeAddress } from '../ingest/parse.ts';
import type { ParsedAddress, ParsedMessage } from '../ingest/types.ts';
import { jsonChunks, jsonColumns } from '../lib/sql.ts';

/**
 * A contact's latest date is kept as `last_email_ms` only (`last_email_at`, '' in rows written since,
 * is made from it on reading: contacts/list.ts).
 */
const CONTACT_COLUMNS = ['address', 'name', 'name_folded', 'name_ms', 'n', 'last_ms'] as const;

/** One contact as a change's new emails name it: how often, its latest date, and the name that wins. */
interface Mentions {
  n: number;
  lastMs: number;
  /** Latest date among the emails before, in order: a name counts only from an email at least as recent. */
  prefixMs: number;
  name: string;
  nameMs: number;
}

/**
 * Participant rows and contact counts of new emails, set-based: one statement for the participants
 * and two for the contacts (existing ones counted up, then new ones inserted) per JSON chunk. A
 * contact's name is that of the latest email naming it with a name, as if the emails came one by one.
 * The account's own addresses are no contacts.
 */
export function countUpStatements(
  db: D1Database,
  accountId: string,
  emails: { row: EmailRow; mail: Pick<ParsedMessage, 'from' | 'to' | 'cc' | 'bcc'> }[],
  ownAddresses: Set<string>,
): D1PreparedStatement[] {
  const participants: unknown[][] = [];
  const contacts = new Map<string, Mentions>();
  for (const { row, mail } of emails) {
    const kinds: [string, ParsedAddress[]][] = [
      ['from', mail.from ? [mail.from] : []],
      ['to', mail.to],
      ['cc', mail.cc],
      ['bcc', mail.bcc],
    ];
    const named = new Map<string, string>();
    for (const [kind, list] of kinds) {
      const seen = new Set<string>();
      for (const a of list) {
        const address = normalizeAddress(a.address);
        if (!address || seen.has(address)) continue;
        seen.add(address);
        participants.push([row.id, kind, address]);
        if (ownAddresses.has(address)) continue;
        if (!named.has(address) || (a.name && !named.get(address))) named.set(address, a.name ?? '');
      }
    }
    for (const [address, name] of named) {
      const c = contacts.get(address) ?? {
        n: 0,
        lastMs: -Infinity,
        prefixMs: -Infinity,
        name: '',
        nameMs: 0,
      };
      if (name && row.date_ms >= c.prefixMs) Object.assign(c, { name, nameMs: row.date_ms });
      c.lastMs = Math.max(c.lastMs, row.date_ms);
      c.prefixMs = Math.max(c.prefixMs, row.date_ms);
      c.n += 1;
      contacts.set(address, c);
    }
  }
  const rows = [...contacts].map(([address, c]) => [address, c.name, c.name.toLowerCase(), c.nameMs, c.n, c.lastMs]);
  const counted = jsonChunks(rows).flatMap((json) => [
    db
      .prepare(
        `UPDATE contacts SET
           emails_count = emails_count + j.n,
           display_name = CASE WHEN j.name != '' AND j.name_ms >= last_email_ms THEN j.name ELSE display_name END,
           display_name_folded = CASE WHEN j.name != '' AND j.name_ms >= last_email_ms
                                      THEN j.name_folded ELSE display_name_folded END,
           last_email_ms = MAX(last_email_ms, j.last_ms)
         FROM (SELECT ${jsonColumns(CONTACT_COLUMNS)} FROM json_each(?1)) AS j
         WHERE contacts.account_id = ?2 AND contacts.identifier = j.address`,
      )
      .bind(json, accountId),
    db
      .prepare(
        `INSERT OR IGNORE INTO contacts
           (account_id, identifier, display_name, display_name_folded, emails_count, last_email_at, last_email_ms)
         SELECT ?2, address, name, name_folded, n, '', last_ms
         FROM (SELECT ${jsonColumns(CONTACT_COLUMNS)} FROM json_each(?1))`,
      )
      .bind(json, accountId),
  ]);
  return [...participantStatements(db, accountId, participants), ...counted];
}

/**
 * The participant rows ([email id, kind, address]) of new emails, by their numbers: the account's
 * number in this database first (given once), then the rows naming it.
 */
function participantStatements(db: D1Database, accountId: string, participants: unknown[][]): D1PreparedStatement[] {
  if (participants.length === 0) return [];
  return [
    db
      .prepare(
        'INSERT OR IGNORE INTO account_numbers (account_id, num) SELECT ?, IFNULL(MAX(num), 0) + 1 FROM account_numbers',
      )
      .bind(accountId),
    ...jsonChunks(participants).map((json) =>
      db
        .prepare(
          `INSERT OR IGNORE INTO participants (num, kind, address, account_num)
           SELECT e.num, json_extract(j.value, '$[1]'), json_extract(j.value, '$[2]'), ${ACCOUNT_NUMBER('?2')}
           FROM json_each(?1) j CROSS JOIN emails e ON e.id = json_extract(j.value, '$[0]')`,
        )
        .bind(json, accountId),
    ),
  ];
}

/** The account's number in this database (migrations/0036_email_numbers.sql), for an SQL account id. */
const ACCOUNT_NUMBER = (accountId: string) => `(SELECT num FROM account_numbers WHERE account_id = ${accountId})`;

/** The numbers of the emails being deleted (?1: their ids as a JSON array). */
const DELETED_NUMBERS = 'SELECT num FROM emails WHERE id IN (SELECT value FROM json_each(?1))';

/**
 * The date of the contact's latest email outside the set being deleted (?1), inside an UPDATE of
 * `contacts`: among the participant rows by number, and those of emails stored before numbers.
 */
const LATEST_REMAINING_EMAIL_MS = `SELECT MAX(date_ms) FROM (
     SELECT e.date_ms FROM participants p JOIN emails e ON e.num = p.num
     WHERE p.address = contacts.identifier AND p.account_num = ${ACCOUNT_NUMBER('contacts.account_id')}
       AND e.id NOT IN (SELECT value FROM json_each(?1))
     UNION ALL
     SELECT e.date_ms FROM email_participants p JOIN emails e ON e.id = p.email_id
     WHERE p.account_id = contacts.account_id AND p.address = contacts.identifier
       AND e.id NOT IN (SELECT value FROM json_each(?1)))`;

/** The contacts these emails name (?1: the email ids as a JSON array). */
const NAMED = `SELECT address FROM participants WHERE num IN (${DELETED_NUMBERS})
  UNION ALL SELECT address FROM email_participants WHERE email_id IN (SELECT value FROM json_each(?1))`;

/**
 * Before emails' rows go: their contacts count down (once per email naming them), take the latest
 * date from what remains, and the ones left at zero are dropped. Two statements for any number of
 * emails; they must run before the participant rows are deleted.
 */
/** The two statements of countDownStatements (?1: the email ids as a JSON array, ?2: the account). */
export const COUNT_DOWN_SQL = [
  `UPDATE contacts SET
     emails_count = emails_count
       - (SELECT COUNT(DISTINCT p.num) FROM participants p
          WHERE p.address = contacts.identifier AND p.account_num = ${ACCOUNT_NUMBER('contacts.account_id')}
            AND p.num IN (${DELETED_NUMBERS}))
       - (SELECT COUNT(DISTINCT p.email_id) FROM email_participants p
          WHERE p.account_id = contacts.account_id AND p.address = contacts.identifier
            AND p.email_id IN (SELECT value FROM json_each(?1))),
     last_email_ms = COALESCE((${LATEST_REMAINING_EMAIL_MS}), last_email_ms)
   WHERE account_id = ?2 AND identifier IN (${NAMED})`,
  `DELETE FROM contacts WHERE account_id = ?2 AND emails_count <= 0 AND identifier IN (${NAMED})`,
] as const;

export function countDownStatements(db: D1Database, accountId: string, emailIds: string[]): D1PreparedStatement[] {
  const ids = JSON.stringify(emailIds);
  return COUNT_DOWN_SQL.map((sql) => db.prepare(sql).bind(ids, accountId));
}
