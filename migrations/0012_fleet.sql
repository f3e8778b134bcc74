-- A fleet of gateways (worker/gateways/fleet.ts): who owns a gateway id, how many accounts each takes
-- and holds, and leases renewed in one set-based statement per heartbeat.

-- The process (random per start) that owns the id; another one is refused while the owner is live.
ALTER TABLE gateways ADD COLUMN instance TEXT;
-- GATEWAY_CAPACITY of the process, and the accounts it held at its last heartbeat (or lease).
ALTER TABLE gateways ADD COLUMN capacity INTEGER NOT NULL DEFAULT 1000;
ALTER TABLE gateways ADD COLUMN held INTEGER NOT NULL DEFAULT 0;
CREATE INDEX gateways_last_seen ON gateways (last_seen_ms);

-- A gateway's leases: renewed, counted and released by gateway id.
CREATE INDEX accounts_gateway ON accounts (gateway_id, lease_expires_ms);
