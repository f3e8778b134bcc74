-- Gateways and account leases, as the Worker sees them.

-- Gateways that have connected their control socket. `connected` is 1 while the socket is open.
CREATE TABLE gateways (
  id            TEXT PRIMARY KEY,            -- GATEWAY_ID of the process
  connected     INTEGER NOT NULL DEFAULT 0,
  connected_at  TEXT NOT NULL,
  last_seen_ms  INTEGER NOT NULL
);

-- A mirror of each account's lease (the account's Durable Object is the authority), so that a
-- heartbeat can find accounts nobody holds with one indexed query.
ALTER TABLE accounts ADD COLUMN gateway_id TEXT;
ALTER TABLE accounts ADD COLUMN lease_expires_ms INTEGER NOT NULL DEFAULT 0;
CREATE INDEX accounts_lease ON accounts (lease_expires_ms);
