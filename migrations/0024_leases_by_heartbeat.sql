-- A lease is held while its holder gateway heartbeats (worker/durable/lease.ts): the heartbeat
-- refreshes the gateway's one row, and no account row carries an expiry of its own any more.
DROP INDEX accounts_lease;
DROP INDEX accounts_gateway;
ALTER TABLE accounts DROP COLUMN lease_expires_ms;

-- A gateway's accounts: counted, offered when it falls silent and released, by gateway id.
CREATE INDEX accounts_gateway ON accounts (gateway_id);
