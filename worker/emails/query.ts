/**
 * GET /emails: filters (DECISIONS.md names) turned into one indexed, keyset-paged query, newest
 * first by (date, id). Ids in filters that are malformed or unknown find nothing (200, empty list).
 */
import { REMOVED_ACCOUNTS } from '../accounts/removed.ts';
import { z } from 'zod';
import { ROLES } from '../schemas/folders.ts';
import { invalid } from '../lib/errors.ts';
import { parseId } from '../lib/ids.ts';
import { cursorPaging, decodeCursor } from '../lib/paging.ts';
import { anyCase, boolParam, instantParam } from '../lib/validation.ts';
import { matchExpression, SEARCH_CONDITION } from './search.ts';

const text = z.string().trim().min(1, 'must not be empty').max(500, 'must be at most 500 characters');

export const EmailFilters = z.object({
  account_id: z.string().optional(),
  folder: z.string().min(1, 'must not be empty').optional(),
  role: anyCase(ROLES).optional(),
  from: text.optional(),
  to: text.optional(),
  any_email: text.optional(),
  thread_id: z.string().optional(),
  unread: boolParam.optional(),
  starred: boolParam.optional(),
  has_attachments: boolParam.optional(),
  subject: z.string().min(1, 'must not be empty').max(500, 'must be at most 500 characters').optional(),
  after: instantParam.optional(),
  before: instantParam.optional(),
  q: text.optional(),
  include_headers: boolParam.optional(),
});

export const EmailListQuery = cursorPaging.extend(EmailFilters.shape);
export type EmailListQuery = z.infer<typeof EmailListQuery>;

/** The drafts list: one account's drafts, or every account's. */
export const DraftListQuery = cursorPaging.extend({ account_id: EmailFilters.shape.account_id });
export type DraftListQuery = z.infer<typeof DraftListQuery>;

/** Folder names a client may use instead of ids. */
const ROLE_NAMES = new Set(['INBOX', 'SENT', 'DRAFTS', 'TRASH', 'SPAM', 'ARCHIVE', 'ALL', 'IMPORTANT', 'STARRED']);

export interface BuiltQuery {
  sql: string;
  params: (string | number)[];
  /** Nothing can match (an unknown id in a filter, a search without words): skip the database. */
  empty: boolean;
}

/** The filters that define a listing, canonical: a cursor is only valid with the same ones. */
export function filtersKey(q: Partial<EmailListQuery>, extra = ''): string {
  const { limit: _limit, cursor: _cursor, include_headers: _headers, ...filters } = q;
  return (
    extra +
    Object.keys(filters)
      .sort()
      .map((k) => `${k}=${String(filters[k as keyof typeof filters])}`)
      .join('&')
  );
}

/**
 * The list query for `q`. The drafts list passes only `account_id` and paging, with `draftsOnly`
 * (which also keeps its cursors apart from the emails list's).
 */
export function buildEmailQuery(
  q: Partial<EmailListQuery> & { limit: number },
  options: { draftsOnly?: boolean } = {},
): BuiltQuery {
  const where: string[] = [];
  const params: (string | number)[] = [];
  let empty = false;
  const accountId = q.account_id === undefined ? undefined : parseId('account', q.account_id);

  if (accountId !== undefined) {
    if (!accountId) empty = true;
    where.push('e.account_id = ?');
    params.push(accountId ?? '');
  }
  // A removed account's emails leave the API at once; its purge takes a while (accounts/purge.ts).
  where.push(`e.account_id NOT IN (${REMOVED_ACCOUNTS})`);
  if (options.draftsOnly) where.push('e.is_draft = 1');
  if (q.folder !== undefined) {
    const folderId = parseId('folder', q.folder);
    if (folderId) {
      where.push('e.id IN (SELECT ef.email_id FROM email_folders ef WHERE ef.folder_id = ?)');
      params.push(folderId);
    } else {
      // A role name (any case: `inbox` is IMAP's INBOX) or the provider's folder path.
      const role = q.folder.toUpperCase();
      where.push(
        `e.id IN (SELECT ef.email_id FROM folders f JOIN email_folders ef ON ef.folder_id = f.id
                  WHERE (f.provider_id = ? OR f.role = ?)${accountId ? ' AND f.account_id = ?' : ''})`,
      );
      params.push(q.folder, ROLE_NAMES.has(role) ? role : '', ...(accountId ? [accountId] : []));
    }
  }
  if (q.role !== undefined) {
    where.push('e.role = ?');
    params.push(q.role);
  }
  if (q.from !== undefined) {
    where.push('e.from_address = ?');
    params.push(q.from.toLowerCase());
  }
  for (const [filter, kinds] of [
    ['to', " AND p.kind IN ('to', 'cc', 'bcc')"],
    ['any_email', ''],
  ] as const) {
    const address = q[filter];
    if (address === undefined) continue;
    // By number, and in the rows of emails stored before numbers.
    where.push(
      `(e.num IN (SELECT p.num FROM participants p WHERE p.address = ?${accountId ? ' AND p.account_num = (SELECT num FROM account_numbers WHERE account_id = ?)' : ''}${kinds})
        OR e.id IN (SELECT p.email_id FROM email_participants p WHERE p.address = ?${accountId ? ' AND p.account_id = ?' : ''}${kinds}))`,
    );
    const account = accountId ? [accountId] : [];
    params.push(address.toLowerCase(), ...account, address.toLowerCase(), ...account);
  }
  if (q.thread_id !== undefined) {
    const id = parseId('thread', q.thread_id);
    if (!id) empty = true;
    where.push('e.thread_id = ?');
    params.push(id ?? '');
  }
  // Literal 0/1 (not parameters): SQLite only uses the partial indexes on `unread = 1` etc. then.
  for (const flag of ['unread', 'starred', 'has_attachments'] as const) {
    if (q[flag] !== undefined) where.push(`e.${flag} = ${q[flag] ? 1 : 0}`);
  }
  if (q.subject !== undefined) {
    // '' when lower() folds the subject as well (sync/email-row.ts).
    where.push("instr(CASE e.subject_folded WHEN '' THEN lower(e.subject) ELSE e.subject_folded END, ?) > 0");
    params.push(q.subject.toLowerCase());
  }
  if (q.after !== undefined) {
    where.push('e.date_ms > ?');
    params.push(q.after);
  }
  if (q.before !== undefined) {
    where.push('e.date_ms < ?');
    params.push(q.before);
  }
  if (q.q !== undefined) {
    const match = matchExpression(q.q);
    if (!match) empty = true;
    where.push(SEARCH_CONDITION);
    params.push(match ?? '', match ?? '', match ?? '');
  }
  if (q.cursor !== undefined) {
    const [dateMs, id] = decodeCursor(q.cursor, filtersKey(q, options.draftsOnly ? 'drafts:' : ''));
    if (typeof dateMs !== 'number' || typeof id !== 'string')
      throw invalid('cursor: not a cursor returned by this API');
    where.push('(e.date_ms < ? OR (e.date_ms = ? AND e.id < ?))');
    params.push(dateMs, dateMs, id);
  }

  const sql = `SELECT e.* FROM emails e ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY e.date_ms DESC, e.id DESC LIMIT ?`;
  params.push(q.limit + 1);
  return { sql, params, empty };
}
