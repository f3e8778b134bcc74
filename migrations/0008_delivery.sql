-- Delivery guarantees (docs/delivery.md).

-- The outbox remembers when an event's fan-out committed (its conversations exist in D1). The sweep
-- re-sends every event without it, whatever happened to its queue messages: no dead-letter queue.
ALTER TABLE events ADD COLUMN fanned_out_at TEXT;
UPDATE events SET fanned_out_at = enqueued_at WHERE enqueued_at IS NOT NULL;
CREATE INDEX events_unfanned ON events (created_at) WHERE fanned_out_at IS NULL;

-- Nonces of signed gateway calls, kept until their signature has expired: a replay is refused.
CREATE TABLE gateway_nonces (
  nonce       TEXT PRIMARY KEY,
  expires_ms  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX gateway_nonces_expiry ON gateway_nonces (expires_ms);

-- Open/click hits per tracking id: `key` is 'open', 'click:<url hash>' (deduplication window) or '*'
-- (the rate limit's window and count).
CREATE TABLE tracking_hits (
  tracking_id      TEXT NOT NULL,
  key              TEXT NOT NULL,
  window_start_ms  INTEGER NOT NULL,
  count            INTEGER NOT NULL,
  PRIMARY KEY (tracking_id, key)
) WITHOUT ROWID;
CREATE INDEX tracking_hits_age ON tracking_hits (window_start_ms);
