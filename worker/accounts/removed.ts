/**
 * Accounts being removed leave the API at once, while their object purges their data in steps
 * (accounts/purge.ts). Reads that are not already scoped to a visible account exclude them with
 * `account_id NOT IN (REMOVED_ACCOUNTS)`; a partial index holds exactly these rows, usually none.
 */
export const REMOVED_ACCOUNTS = 'SELECT id FROM accounts WHERE removed_at_ms IS NOT NULL';

/** The condition on `accounts` itself. */
export const NOT_REMOVED = 'removed_at_ms IS NULL';

/** SQL: the account `account` (an SQL expression) exists and is not being removed (a primary-key lookup). */
export const LIVE_ACCOUNT = (account: string) =>
  `EXISTS (SELECT 1 FROM accounts live WHERE live.id = ${account} AND live.${NOT_REMOVED})`;

/**
 * SQL: an event of type `type` and account `account` (SQL expressions) that the API and webhooks
 * still show: of no account, of a live one, or the removal itself. A removed account's other events
 * are hidden whether its row is still there (being purged) or already gone.
 */
export const EVENT_OF_LIVE_ACCOUNT = (type: string, account: string) =>
  `(${account} IS NULL OR ${type} = 'account.remove' OR ${LIVE_ACCOUNT(account)})`;
