/**
 * Full-text search over subject, body and participants (the `q` filter of GET /emails), on D1's
 * FTS5. Writing: one index row per email whose rowid is the email's number (`emails.num`), in the
 * batch that inserts the email, many emails per statement; removing the email removes it
 * (emails/delete.ts). Emails stored before numbers have their index row under their `email_search`
 * row's rowid, removed with that row (trigger in migrations/0027_search_without_positions.sql).
 * Reading: user text never reaches FTS5 as syntax; every word is a quoted string. The index keeps
 * no positions (migrations/0027_search_without_positions.sql), so a search is words, never a phrase:
 * a word the tokenizer splits (`zoe.quinn@example.test`) requires each of its parts.
 */
import type { ParsedAddress } from '../ingest/types.ts';
import { jsonChunks } from '../lib/sql.ts';

/** Indexing cost stays bounded: only the start of a very long body is indexed. */
const MAX_INDEXED_BODY_CHARS = 200_000;
/** More words than this add nothing to a search but cost. */
const MAX_TERMS = 32;

export interface SearchDocument {
  emailId: string;
  subject: string;
  body: string;
  /** The email's row holds `body` as `body_plain` (written before the index rows, same batch). */
  bodyInRow: boolean;
  participants: (ParsedAddress | null)[];
}

/** The index rows of new emails, by their numbers: one statement per JSON chunk (sync/bulk.ts). */
export function indexEmailsStatements(db: D1Database, docs: SearchDocument[]): D1PreparedStatement[] {
  if (docs.length === 0) return [];
  const rows = docs.map((doc) => [
    doc.emailId,
    doc.subject,
    // A body the row holds whole is read from there: its text does not travel to D1 twice.
    doc.bodyInRow && doc.body.length <= MAX_INDEXED_BODY_CHARS ? null : doc.body.slice(0, MAX_INDEXED_BODY_CHARS),
    doc.participants
      .filter((a): a is ParsedAddress => a !== null)
      .map((a) => `${a.name ?? ''} ${a.address}`.trim())
      .join(' '),
  ]);
  return jsonChunks(rows).map((json) =>
    db
      .prepare(
        `INSERT INTO emails_fts (rowid, subject, body, participants)
         SELECT e.num, json_extract(j.value, '$[1]'), COALESCE(json_extract(j.value, '$[2]'), e.body_plain),
                json_extract(j.value, '$[3]')
         FROM json_each(?) j CROSS JOIN emails e ON e.id = json_extract(j.value, '$[0]')`,
      )
      .bind(json),
  );
}

/**
 * What the index's tokenizer (unicode61: letters, numbers and private-use characters) takes as one
 * token; everything else separates tokens. A quoted string holding two tokens would be a phrase,
 * which an index without positions refuses, so words are split here as the tokenizer splits them.
 */
const SEPARATORS = /[^\p{L}\p{N}\p{Co}]+/u;

/**
 * An FTS5 MATCH expression requiring every word of `text`, each token a quoted string (quotes doubled),
 * so operators, `*`, `(`, `:` or `"` are just characters. Words without a letter or digit cannot match
 * a token and are dropped; null when nothing is left (the search finds nothing).
 */
export function matchExpression(text: string): string | null {
  const terms = text
    .split(/\s+/)
    .filter((word) => /[\p{L}\p{N}]/u.test(word))
    .slice(0, MAX_TERMS)
    .flatMap((word) => word.split(SEPARATORS).filter((token) => token !== ''))
    .map((token) => `"${token.replace(/"/g, '""')}"`);
  return terms.length ? [...new Set(terms)].join(' ') : null;
}

/**
 * The condition on `emails e` for a MATCH expression bound three times: the index by the email's
 * number, and for emails stored before numbers, by their `email_search` row in the index and in the
 * one with positions that holds the emails indexed before it (looked at only while such rows exist).
 */
export const SEARCH_CONDITION = `(e.num IN (SELECT rowid FROM emails_fts WHERE emails_fts MATCH ?)
  OR (EXISTS (SELECT 1 FROM email_search) AND e.id IN (SELECT s.email_id FROM email_search s WHERE s.rowid IN
    (SELECT rowid FROM emails_fts WHERE emails_fts MATCH ?
     UNION ALL SELECT rowid FROM emails_fts_positions WHERE emails_fts_positions MATCH ?))))`;
