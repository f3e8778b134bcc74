/**
 * GET /emails: filters (DECISIONS.md names) turned into one indexed, keyset-paged query, newest
 * first by (date, id). Ids in filters that are malformed or unknown find nothing (200, empty list).
 */
import { z } from 'zod';
import { ROLES } from '../folders/present.ts';
import { parseId } from '../lib/ids.ts';
import { cursorPaging, decodeCursor } from '../lib/paging.ts';
import { boolParam, instantParam } from '../lib/validation.ts';

export const EmailFilters = z.object({
  account_id: z.string().optional(),
  folder: z.string().min(1, 'must not be empty').optional(),
  role: z.enum(ROLES, { error: `must be one of ${ROLES.join(', ')}` }).optional(),
  from: z.string().min(1).optional(),
  to: z.string().min(1).optional(),
  any_email: z.string().min(1).optional(),
  thread_id: z.string().optional(),
  unread: boolParam.optional(),
  starred: boolParam.optional(),
  has_attachments: boolParam.optional(),
  subject: z.string().min(1, 'must not be empty').optional(),
  after: instantParam.optional(),
  before: instantParam.optional(),
  include_headers: boolParam.optional(),
});

export const EmailListQuery = cursorPaging.extend(EmailFilters.shape);
export type EmailListQuery = z.infer<typeof EmailListQuery>;

/** Folder names a client may use instead of ids. */
const ROLE_NAMES = new Set(['INBOX', 'SENT', 'DRAFTS', 'TRASH', 'SPAM', 'ARCHIVE', 'ALL', 'IMPORTANT', 'STARRED']);

export interface BuiltQuery {
  sql: string;
  params: (string | number)[];
  /** Nothing can match (an unknown id in a filter): skip the database. */
  empty: boolean;
}

/** The filters that define a listing, canonical: a cursor is only valid with the same ones. */
export function filtersKey(q: EmailListQuery, extra = ''): string {
  const { limit: _limit, cursor: _cursor, include_headers: _headers, ...filters } = q;
  return (
    extra +
    Object.keys(filters)
      .sort()
      .map((k) => `${k}=${String(filters[k as keyof typeof filters])}`)
      .join('&')
  );
}

export function buildEmailQuery(q: EmailListQuery, options: { draftsOnly?: boolean } = {}): BuiltQuery {
  const where: string[] = [];
  const params: (string | number)[] = [];
  let empty = false;

  if (q.account_id !== undefined) {
    const id = parseId('account', q.account_id);
    if (!id) empty = true;
    where.push('e.account_id = ?');
    params.push(id ?? '');
  }
  if (options.draftsOnly) where.push('e.is_draft = 1');
  if (q.folder !== undefined) {
    const folderId = parseId('folder', q.folder);
    if (folderId) {
      where.push('e.id IN (SELECT email_id FROM email_folders WHERE folder_id = ?)');
      params.push(folderId);
    } else if (ROLE_NAMES.has(q.folder.toUpperCase())) {
      where.push('e.id IN (SELECT ef.email_id FROM email_folders ef JOIN folders f ON f.id = ef.folder_id WHERE f.role = ? AND f.account_id = e.account_id)');
      params.push(q.folder.toUpperCase());
    } else {
      where.push('e.id IN (SELECT ef.email_id FROM email_folders ef JOIN folders f ON f.id = ef.folder_id WHERE f.provider_id = ? AND f.account_id = e.account_id)');
      params.push(q.folder);
    }
  }
  if (q.role !== undefined) {
    where.push('e.role = ?');
    params.push(q.role);
  }
  if (q.from !== undefined) {
    where.push('e.from_address = ?');
    params.push(q.from.trim().toLowerCase());
  }
  if (q.to !== undefined) {
    where.push("EXISTS (SELECT 1 FROM email_participants p WHERE p.email_id = e.id AND p.address = ? AND p.kind IN ('to', 'cc', 'bcc'))");
    params.push(q.to.trim().toLowerCase());
  }
  if (q.any_email !== undefined) {
    where.push('EXISTS (SELECT 1 FROM email_participants p WHERE p.email_id = e.id AND p.address = ?)');
    params.push(q.any_email.trim().toLowerCase());
  }
  if (q.thread_id !== undefined) {
    const id = parseId('thread', q.thread_id);
    if (!id) empty = true;
    where.push('e.thread_id = ?');
    params.push(id ?? '');
  }
  for (const flag of ['unread', 'starred', 'has_attachments'] as const) {
    if (q[flag] !== undefined) {
      where.push(`e.${flag} = ?`);
      params.push(q[flag] ? 1 : 0);
    }
  }
  if (q.subject !== undefined) {
    where.push('instr(lower(e.subject), lower(?)) > 0');
    params.push(q.subject);
  }
  if (q.after !== undefined) {
    where.push('e.date_ms > ?');
    params.push(q.after);
  }
  if (q.before !== undefined) {
    where.push('e.date_ms < ?');
    params.push(q.before);
  }
  if (q.cursor !== undefined) {
    const [dateMs, id] = decodeCursor(q.cursor, filtersKey(q, options.draftsOnly ? 'drafts:' : ''));
    where.push('(e.date_ms < ? OR (e.date_ms = ? AND e.id < ?))');
    params.push(Number(dateMs), Number(dateMs), String(id));
  }

  const sql = `SELECT e.* FROM emails e ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY e.date_ms DESC, e.id DESC LIMIT ?`;
  params.push(q.limit + 1);
  return { sql, params, empty };
}
