/** The Account object as the API shows it (DECISIONS.md: Account object). */
import type { ACCOUNT_STATUSES, Account, INITIAL_SYNC_STATES } from '../schemas/accounts.ts';

export interface AccountRow {
  id: string;
  provider: string;
  email: string;
  display_name: string | null;
  user_id: string;
  status: string;
  is_locked: number;
  initial_sync: string;
  initial_sync_enable: number;
  initial_sync_days: number | null;
  metadata_json: string | null;
  state: string | null;
  created_at: string;
  connected_at: string | null;
  last_error: string | null;
}

/** Columns to select for `presentAccount`: never the credentials. */
export const ACCOUNT_COLUMNS =
  'id, provider, email, display_name, user_id, status, is_locked, initial_sync, initial_sync_enable, ' +
  'initial_sync_days, metadata_json, state, created_at, connected_at, last_error';

export function presentAccount(row: AccountRow): Account {
  return {
    object: 'Account' as const,
    id: row.id,
    provider: 'imap',
    email: row.email,
    display_name: row.display_name,
    user_id: row.user_id,
    status: row.status as (typeof ACCOUNT_STATUSES)[number],
    is_locked: row.is_locked === 1,
    initial_sync: row.initial_sync as (typeof INITIAL_SYNC_STATES)[number],
    initial_sync_enable: row.initial_sync_enable === 1,
    initial_sync_days: row.initial_sync_days,
    metadata: row.metadata_json ? (JSON.parse(row.metadata_json) as Record<string, unknown>) : {},
    state: row.state,
    created_at: row.created_at,
    connected_at: row.connected_at,
    last_error: row.last_error,
  };
}
