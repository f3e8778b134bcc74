-- Delivery guarantees, second part (docs/delivery.md): sends whose outcome is not known
-- are never sent again, and account removal runs in bounded steps.

-- An outgoing message's outcome: `pending` while the gateway has it and has not answered, `sent`,
-- or `failed` (the gateway reported that nothing went out). Rows from before this migration were sent.
ALTER TABLE outgoing_messages ADD COLUMN outcome TEXT NOT NULL DEFAULT 'sent';
ALTER TABLE outgoing_messages ADD COLUMN outcome_detail TEXT;

-- An Idempotency-Key whose send has an unknown outcome stays claimed (`status = 'unresolved'`) and
-- names the outgoing message that resolves it; `pending_json` is the answer it gets if that was sent.
ALTER TABLE idempotency_keys ADD COLUMN account_id TEXT;
ALTER TABLE idempotency_keys ADD COLUMN message_id TEXT;
ALTER TABLE idempotency_keys ADD COLUMN pending_json TEXT;

-- A removed account disappears from the API at once; its object purges its data in steps and then
-- deletes the row. The mailbox may be connected again meanwhile, so the one-account-per-mailbox rule
-- only counts accounts not being removed.
ALTER TABLE accounts ADD COLUMN removed_at_ms INTEGER;
CREATE INDEX accounts_removed ON accounts (id) WHERE removed_at_ms IS NOT NULL;
DROP INDEX accounts_mailbox;
CREATE UNIQUE INDEX accounts_mailbox ON accounts (lower(email), lower(imap_host)) WHERE removed_at_ms IS NULL;
