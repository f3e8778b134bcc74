/**
 * The D1 rows a `messages` change writes, gathered while its messages are decided one by one and
 * written set-based at the end (sync/bulk.ts): a few statements per change, whatever its size,
 * instead of several per message. The change commits as one D1 batch, so its emails and their
 * events are written together or not at all.
 */
import { countUpStatements } from '../contacts/counts.ts';
import { blobHex } from '../emails/content.ts';
import type { AttachmentRow, EmailRow } from '../emails/present.ts';
import { indexEmailsStatements, type SearchDocument } from '../emails/search.ts';
import type { ParsedMessage } from '../ingest/types.ts';
import { JsonText } from '../lib/sql.ts';
import { threadKeyStatements } from '../threads/threader.ts';
import { deleteRows, insertRows, updateRows } from './bulk.ts';
import type { Membership } from './memberships.ts';

const MEMBERSHIP_COLUMNS = ['email_id', 'folder_id', 'account_id', 'uid', 'seen', 'flagged'] as const;
/**
 * The numbers a statement's new emails take (`emails.num`, migrations/0036_email_numbers.sql): the
 * next ones above every number in use, one per JSON row (`key`). The first, in a database with
 * `email_search` rows (whose rowids the search index keys too), starts a million above them: an
 * older Worker adding such rows during a deploy stays far below. Ascending keys keep every b-tree
 * they enter full (SQLite splits a page at its right end as rows are appended).
 */
const NEXT_NUMBERS = `IFNULL((SELECT MAX(num) FROM emails WHERE num IS NOT NULL),
  IFNULL((SELECT MAX(rowid) FROM email_search) + 1000000, 0)) + key + 1`;

/** Email columns holding JSON (an array or object, or null): they go to D1 as JSON, not as strings. */
const JSON_COLUMNS = new Set([
  'references_json',
  'from_json',
  'to_json',
  'cc_json',
  'bcc_json',
  'reply_to_json',
  'headers_json',
]);

/** Email columns holding a BLOB: they travel as hex (see jsonColumns). */
const BLOB_COLUMNS: ReadonlySet<string> = new Set(['content']);

const rowValues = <T extends object>(rows: T[]): { columns: string[]; values: unknown[][] } => {
  const columns = rows.length ? Object.keys(rows[0]!) : [];
  const value = (r: T, c: string) => {
    const v = (r as Record<string, unknown>)[c];
    if (v instanceof Uint8Array) return blobHex(v);
    return JSON_COLUMNS.has(c) && typeof v === 'string' ? new JsonText(v) : v;
  };
  return { columns, values: rows.map((r) => columns.map((c) => value(r, c))) };
};

export class NewMailRows {
  private readonly accountId: string;
  private readonly emails: EmailRow[] = [];
  private readonly attachments: AttachmentRow[] = [];
  private readonly memberships: unknown[][] = [];
  /** Memberships that take a new UID (stale after a renumbering, or left and came back). */
  private readonly restored: unknown[][] = [];
  private readonly unorphaned: string[] = [];
  /** Places a move's arrival takes its email out of (the source the gateway says is being expunged). */
  private readonly departed: unknown[][] = [];
  private readonly threadKeys: unknown[][] = [];
  private readonly search: SearchDocument[] = [];
  private readonly people: { row: EmailRow; mail: ParsedMessage }[] = [];
  /** Thread merges, after the inserts: they also move this change's emails of a merged thread. */
  private readonly merges: D1PreparedStatement[] = [];

  constructor(accountId: string) {
    this.accountId = accountId;
  }

  get created(): number {
    return this.emails.length;
  }

  addEmail(
    row: EmailRow,
    mail: ParsedMessage,
    extra: { attachments: AttachmentRow[]; membership: Membership; threadKeys: unknown[][] },
  ): void {
    this.emails.push(row);
    this.attachments.push(...extra.attachments);
    this.addMembership(row.id, extra.membership);
    this.threadKeys.push(...extra.threadKeys);
    this.search.push({
      emailId: row.id,
      subject: row.subject,
      body: mail.plain,
      bodyInRow: row.body_plain === mail.plain,
      participants: [mail.from, ...mail.to, ...mail.cc, ...mail.bcc],
    });
    this.people.push({ row, mail });
  }

  addMembership(emailId: string, m: Membership): void {
    this.memberships.push([emailId, m.folder_id, this.accountId, m.uid, m.seen, m.flagged]);
  }

  /** An email takes its place in the folder back under a new UID. */
  restore(emailId: string, m: Membership): void {
    this.restored.push([emailId, m.folder_id, m.uid, m.seen, m.flagged]);
  }

  /** An email leaves a place in the same unit as it arrives elsewhere (a move is one email.update). */
  depart(emailId: string, m: Pick<Membership, 'folder_id' | 'uid'>): void {
    this.departed.push([emailId, m.folder_id, m.uid]);
  }

  /** An email found a folder again: it is no orphan any more. */
  unorphan(emailId: string): void {
    this.unorphaned.push(emailId);
  }

  merge(statements: D1PreparedStatement[]): void {
    this.merges.push(...statements);
  }

  statements(db: D1Database, ownAddresses: Set<string>): D1PreparedStatement[] {
    const emails = rowValues(this.emails);
    const attachments = rowValues(this.attachments);
    return [
      ...insertRows(db, 'emails', emails.columns, emails.values, {
        hex: BLOB_COLUMNS,
        extra: { num: NEXT_NUMBERS },
      }),
      ...indexEmailsStatements(db, this.search),
      ...updateRows(db, 'email_folders', ['email_id', 'folder_id'], ['uid', 'seen', 'flagged'], this.restored),
      ...insertRows(db, 'email_folders', MEMBERSHIP_COLUMNS, this.memberships),
      ...deleteRows(db, 'email_folders', ['email_id', 'folder_id', 'uid'], this.departed),
      ...(this.unorphaned.length
        ? [
            db
              .prepare('UPDATE emails SET orphaned_at_ms = NULL WHERE id IN (SELECT value FROM json_each(?))')
              .bind(JSON.stringify(this.unorphaned)),
          ]
        : []),
      ...insertRows(db, 'attachments', attachments.columns, attachments.values),
      ...threadKeyStatements(db, this.threadKeys),
      ...countUpStatements(db, this.accountId, this.people, ownAddresses),
      ...this.merges,
    ];
  }
}
