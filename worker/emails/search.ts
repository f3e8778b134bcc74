/**
 * Full-text search over subject, body and participants (the `q` filter of GET /emails), on D1's
 * FTS5. Writing: one `email_search` row (the email's stable FTS rowid) and one index row per email,
 * in the batch that inserts the email, many emails per statement. Removing: deleting the `email_search` row (directly or by
 * the cascade from `emails`) drops the index row (trigger in migrations/0004_read_side.sql).
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
  accountId: string;
  subject: string;
  body: string;
  /** The email's row holds `body` as `body_plain` (written before the index rows, same batch). */
  bodyInRow: boolean;
  participants: (ParsedAddress | null)[];
}

/** The search rows of new emails: one `email_search` and one index statement per JSON chunk (sync/bulk.ts). */
export function indexEmailsStatements(db: D1Database, docs: SearchDocument[]): D1PreparedStatement[] {
  if (docs.length === 0) return [];
  const rows = docs.map((doc) => [
    doc.emailId,
    doc.accountId,
    doc.subject,
    // A body the row holds whole is read from there: its text does not travel to D1 twice.
    doc.bodyInRow && doc.body.length <= MAX_INDEXED_BODY_CHARS ? null : doc.body.slice(0, MAX_INDEXED_BODY_CHARS),
    doc.participants
      .filter((a): a is ParsedAddress => a !== null)
      .map((a) => `${a.name ?? ''} ${a.address}`.trim())
      .join(' '),
  ]);
  return jsonChunks(rows).flatMap((json) => [
    db
      .prepare(
        `INSERT INTO email_search (email_id, account_id)
         SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?)`,
      )
      .bind(json),
    db
      .prepare(
        `INSERT INTO emails_fts (rowid, subject, body, participants)
         SELECT s.rowid, json_extract(j.value, '$[2]'), COALESCE(json_extract(j.value, '$[3]'), e.body_plain),
                json_extract(j.value, '$[4]')
         FROM json_each(?) j CROSS JOIN email_search s ON s.email_id = json_extract(j.value, '$[0]')
         CROSS JOIN emails e ON e.id = s.email_id`,
      )
      .bind(json),
  ]);
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
 * The condition on `emails e` for a MATCH expression bound twice: the index, and the one with
 * positions that holds the emails indexed before it.
 */
export const SEARCH_CONDITION = `e.id IN (SELECT s.email_id FROM email_search s WHERE s.rowid IN
  (SELECT rowid FROM emails_fts WHERE emails_fts MATCH ?
   UNION ALL SELECT rowid FROM emails_fts_positions WHERE emails_fts_positions MATCH ?))`;
