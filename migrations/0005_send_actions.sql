-- Sending and drafts. Every message the API sends or saves as a draft is recorded here
-- before it reaches the mail server, under its Message-ID: when its Sent (or Drafts) copy syncs, the
-- sync finds it and marks the email `origin: api` with its tracking id and draft id.
CREATE TABLE outgoing_messages (
  account_id      TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  message_id      TEXT NOT NULL,             -- with angle brackets
  kind            TEXT NOT NULL,             -- send | draft
  tracking_id     TEXT,                      -- trk_… when tracking_options were given
  tracking_label  TEXT,
  draft_id        TEXT,                      -- drf_… for drafts
  created_at      TEXT NOT NULL,
  PRIMARY KEY (account_id, message_id)
);
CREATE UNIQUE INDEX outgoing_messages_by_tracking ON outgoing_messages (tracking_id) WHERE tracking_id IS NOT NULL;

-- Tracking events name the email that carries the tracking id.
CREATE INDEX emails_by_tracking ON emails (tracking_id) WHERE tracking_id IS NOT NULL;
