-- A send's claim is bound to the request that made it (`claim_id`): a request whose claim was taken
-- over never hands its message to a gateway. Removing an account deletes its idempotency records
-- (by account, index below), its events and their delivery log (events_account_seq), and the
-- tracking hits of its messages (by tracking id, from outgoing_messages).
ALTER TABLE idempotency_keys ADD COLUMN claim_id TEXT;
CREATE INDEX idempotency_keys_by_account ON idempotency_keys (account_id) WHERE account_id IS NOT NULL;
