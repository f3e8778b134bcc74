/**
 * Accounts being removed leave the API at once, while their object purges their data in steps
 * (accounts/purge.ts). Reads that are not already scoped to a visible account exclude them with
 * `account_id NOT IN (REMOVED_ACCOUNTS)`; a partial index holds exactly these rows, usually none.
 */
export const REMOVED_ACCOUNTS = 'SELECT id FROM accounts WHERE removed_at_ms IS NOT NULL';

/** The condition on `accounts` itself. */
export const NOT_REMOVED = 'removed_at_ms IS NULL';
