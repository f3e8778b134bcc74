/**
 * GET /contacts: the people an account (or, without `account_id`, every account: each contact once
 * per account) has emailed with, most recent first, keyset-paged on (last_email_ms DESC,
 * identifier, account_id). Rows are kept by sync (worker/sync/apply.ts counts up,
 * the account object counts down when an email is deleted); the account's own addresses never enter.
 */
import { REMOVED_ACCOUNTS } from '../accounts/removed.ts';
import { z } from 'zod';
import type { Contact } from '../schemas/accounts.ts';
import { parseId } from '../lib/ids.ts';
import { iso } from '../lib/time.ts';
import { cursorList, cursorPaging, decodeCursor, type CursorList } from '../lib/paging.ts';
import { invalid } from '../lib/errors.ts';
import type { Env } from '../env.ts';
import { keyOrder, mergePages, onListShards } from '../shards/spread.ts';

export const ContactListQuery = cursorPaging.extend({
  account_id: z.string().optional(),
  q: z.string().trim().min(1, 'must not be empty').max(320, 'must be at most 320 characters').optional(),
});
export type ContactListQuery = z.infer<typeof ContactListQuery>;

export interface ContactRow {
  account_id: string;
  identifier: string;
  display_name: string;
  emails_count: number;
  last_email_ms: number;
}

export function presentContact(row: ContactRow): Contact {
  return {
    object: 'Contact' as const,
    account_id: row.account_id,
    identifier: row.identifier,
    display_name: row.display_name,
    emails_count: row.emails_count,
    // Rows written before hold the same as text; rows since keep ''.
    last_email_at: iso(row.last_email_ms),
  };
}

/** The list's order: most recent first, then by identifier and account. */
const CONTACT_ORDER = keyOrder((r: ContactRow) => [r.last_email_ms, r.identifier, r.account_id], [true, false, false]);

export async function listContacts(env: Env, q: ContactListQuery): Promise<CursorList<Contact>> {
  const filtersKey = `contacts:account_id=${q.account_id ?? ''}&q=${q.q ?? ''}`;
  // A removed account's contacts leave the API at once (accounts/removed.ts).
  const where: string[] = [`account_id NOT IN (${REMOVED_ACCOUNTS})`];
  const params: (string | number)[] = [];
  if (q.account_id !== undefined) {
    // A malformed or unknown id in a filter finds nothing.
    where.push('account_id = ?');
    params.push(parseId('account', q.account_id) ?? '');
  }
  if (q.q !== undefined) {
    // Identifiers are stored lower-cased; names are matched on their lower-cased copy (any script).
    where.push('(instr(identifier, ?) > 0 OR instr(display_name_folded, ?) > 0)');
    params.push(q.q.toLowerCase(), q.q.toLowerCase());
  }
  if (q.cursor !== undefined) {
    const [lastMs, identifier, accountId] = decodeCursor(q.cursor, filtersKey);
    if (typeof lastMs !== 'number' || typeof identifier !== 'string' || typeof accountId !== 'string')
      throw invalid('cursor: not a cursor returned by this API');
    where.push(
      '(last_email_ms < ? OR (last_email_ms = ? AND (identifier > ? OR (identifier = ? AND account_id > ?))))',
    );
    params.push(lastMs, lastMs, identifier, identifier, accountId);
  }
  const accountId = q.account_id === undefined ? undefined : parseId('account', q.account_id);
  const pages = await onListShards(env, accountId, async (shard) => {
    const { results } = await shard.DB.prepare(
      `SELECT * FROM contacts WHERE ${where.join(' AND ')}
       ORDER BY last_email_ms DESC, identifier, account_id LIMIT ?`,
    )
      .bind(...params, q.limit + 1)
      .all<ContactRow>();
    return results;
  });
  const rows = mergePages(pages, q.limit, CONTACT_ORDER);
  return cursorList(
    'Contacts',
    rows,
    q.limit,
    filtersKey,
    (r) => [r.last_email_ms, r.identifier, r.account_id],
    presentContact,
  );
}
