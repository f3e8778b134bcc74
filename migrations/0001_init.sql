-- The data model the API reads. Timestamps are ISO 8601 strings (UTC, millisecond precision);
-- columns ending in _ms are the same instants as integers, for ordering and range filters.
-- JSON columns end in _json. Booleans are 0/1.

-- API keys: only a SHA-256 hash of the key is stored; `prefix` is the leading, non-secret part.
CREATE TABLE api_keys (
  id            TEXT PRIMARY KEY,            -- pk_…
  name          TEXT NOT NULL,
  prefix        TEXT NOT NULL,
  key_hash      TEXT NOT NULL UNIQUE,        -- hex SHA-256 of the whole key
  role          TEXT NOT NULL DEFAULT 'service',
  issued_at     TEXT NOT NULL,
  last_used_at  TEXT,
  revoked_at    TEXT
);
CREATE INDEX api_keys_listing ON api_keys (revoked_at, issued_at DESC, id DESC);

-- Connected mailboxes. Passwords live only in `credentials`, AES-GCM encrypted.
CREATE TABLE accounts (
  id                   TEXT PRIMARY KEY,     -- acc_…
  provider             TEXT NOT NULL DEFAULT 'imap',
  email                TEXT NOT NULL,
  display_name         TEXT,
  user_id              TEXT NOT NULL,        -- the IMAP login
  imap_host            TEXT NOT NULL,
  imap_port            INTEGER NOT NULL,
  imap_encryption      TEXT NOT NULL,        -- SSL | STARTTLS | NONE
  smtp_host            TEXT NOT NULL,
  smtp_port            INTEGER NOT NULL,
  smtp_encryption      TEXT NOT NULL,
  smtp_user            TEXT NOT NULL,
  credentials          TEXT NOT NULL,        -- encrypted JSON {imap_password, smtp_password}
  status               TEXT NOT NULL DEFAULT 'running',  -- running | errored | disconnected
  is_locked            INTEGER NOT NULL DEFAULT 0,
  initial_sync         TEXT NOT NULL DEFAULT 'none',     -- none | running | completed | failed
  initial_sync_enable  INTEGER NOT NULL DEFAULT 0,
  initial_sync_days    INTEGER,
  metadata_json        TEXT,
  state                TEXT,
  last_error           TEXT,
  created_at           TEXT NOT NULL,
  connected_at         TEXT,
  updated_at           TEXT NOT NULL
);
-- One account per mailbox (same address on the same IMAP host).
CREATE UNIQUE INDEX accounts_mailbox ON accounts (lower(email), lower(imap_host));
CREATE INDEX accounts_listing ON accounts (created_at DESC, id DESC);

CREATE TABLE folders (
  id            TEXT PRIMARY KEY,            -- fld_…
  account_id    TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  provider_id   TEXT NOT NULL,               -- full IMAP path
  name          TEXT NOT NULL,               -- last path segment
  role          TEXT NOT NULL DEFAULT 'UNKNOWN',
  parent_id     TEXT,
  delimiter     TEXT,
  total_count   INTEGER NOT NULL DEFAULT 0,
  created_at    TEXT NOT NULL,
  updated_at    TEXT NOT NULL,
  UNIQUE (account_id, provider_id)
);
CREATE INDEX folders_role ON folders (account_id, role);

-- One row per message, whatever folders it is in. `identity` is what makes the id stable:
-- Gmail's X-GM-MSGID where present, else Message-ID plus a fingerprint.
CREATE TABLE emails (
  id                 TEXT PRIMARY KEY,       -- email_…
  account_id         TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  identity           TEXT NOT NULL,
  thread_id          TEXT NOT NULL,          -- thr_…
  provider_id        TEXT,                   -- provider's message id (X-GM-MSGID) or null
  message_id         TEXT,                   -- with angle brackets
  in_reply_to        TEXT,
  references_json    TEXT NOT NULL DEFAULT '[]',
  date               TEXT NOT NULL,
  date_ms            INTEGER NOT NULL,
  subject            TEXT NOT NULL DEFAULT '',
  snippet            TEXT NOT NULL DEFAULT '',
  from_json          TEXT,
  to_json            TEXT NOT NULL DEFAULT '[]',
  cc_json            TEXT NOT NULL DEFAULT '[]',
  bcc_json           TEXT NOT NULL DEFAULT '[]',
  reply_to_json      TEXT NOT NULL DEFAULT '[]',
  from_address       TEXT,                   -- lower-cased, for the `from` filter
  body_html          TEXT,                   -- null when stored in R2 (body_key)
  body_plain         TEXT,
  body_key           TEXT,                   -- R2 key of {html, plain} when bodies are large
  headers_json       TEXT NOT NULL DEFAULT '[]',
  raw_key            TEXT,                   -- R2 key of the RFC 822 source
  size               INTEGER NOT NULL DEFAULT 0,
  has_attachments    INTEGER NOT NULL DEFAULT 0,
  unread             INTEGER NOT NULL DEFAULT 1,
  starred            INTEGER NOT NULL DEFAULT 0,
  is_draft           INTEGER NOT NULL DEFAULT 0,
  role               TEXT NOT NULL DEFAULT 'UNKNOWN',  -- the main role
  origin             TEXT NOT NULL DEFAULT 'external', -- api | external
  tracking_id        TEXT,
  draft_id           TEXT,                   -- drf_… for drafts
  created_at         TEXT NOT NULL,
  updated_at         TEXT NOT NULL,
  UNIQUE (account_id, identity)
);
CREATE INDEX emails_by_date ON emails (date_ms DESC, id DESC);
CREATE INDEX emails_by_account ON emails (account_id, date_ms DESC, id DESC);
CREATE INDEX emails_by_role ON emails (account_id, role, date_ms DESC, id DESC);
CREATE INDEX emails_by_thread ON emails (thread_id, date_ms, id);
CREATE INDEX emails_by_message_id ON emails (account_id, message_id);

-- Folder membership: which (folder, UID) holds which email. Moves change rows here, never the email id.
CREATE TABLE email_folders (
  email_id    TEXT NOT NULL REFERENCES emails(id) ON DELETE CASCADE,
  folder_id   TEXT NOT NULL REFERENCES folders(id) ON DELETE CASCADE,
  account_id  TEXT NOT NULL,
  uid         INTEGER NOT NULL,
  PRIMARY KEY (email_id, folder_id),
  UNIQUE (folder_id, uid)
);
CREATE INDEX email_folders_by_folder ON email_folders (folder_id, email_id);

-- Every participant of every email, for the from/to/any_email filters and contacts.
CREATE TABLE email_participants (
  email_id    TEXT NOT NULL REFERENCES emails(id) ON DELETE CASCADE,
  account_id  TEXT NOT NULL,
  kind        TEXT NOT NULL,                 -- from | to | cc | bcc
  address     TEXT NOT NULL,                 -- lower-cased
  PRIMARY KEY (email_id, kind, address)
);
CREATE INDEX email_participants_by_address ON email_participants (address, account_id);

CREATE TABLE attachments (
  id          TEXT PRIMARY KEY,              -- att_…
  email_id    TEXT NOT NULL REFERENCES emails(id) ON DELETE CASCADE,
  account_id  TEXT NOT NULL,
  name        TEXT NOT NULL,
  extension   TEXT NOT NULL DEFAULT '',
  size        INTEGER NOT NULL,
  mime        TEXT NOT NULL,
  cid         TEXT,
  inline      INTEGER NOT NULL DEFAULT 0,
  blob_key    TEXT NOT NULL                  -- R2 key of the decoded bytes
);
CREATE INDEX attachments_by_email ON attachments (email_id);

CREATE TABLE contacts (
  account_id     TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  identifier     TEXT NOT NULL,              -- lower-cased address
  display_name   TEXT NOT NULL DEFAULT '',
  emails_count   INTEGER NOT NULL DEFAULT 0,
  last_email_at  TEXT NOT NULL,
  last_email_ms  INTEGER NOT NULL,
  PRIMARY KEY (account_id, identifier)
);
CREATE INDEX contacts_recent ON contacts (account_id, last_email_ms DESC, identifier);

CREATE TABLE webhook_endpoints (
  id                  TEXT PRIMARY KEY,      -- we_…
  url                 TEXT NOT NULL,
  description         TEXT NOT NULL DEFAULT '',
  trigger_events_json TEXT NOT NULL,
  account_ids_json    TEXT NOT NULL DEFAULT '[]',
  headers_json        TEXT NOT NULL DEFAULT '[]',
  secret              TEXT NOT NULL,         -- encrypted whsec_… (it must be usable to sign)
  enabled             INTEGER NOT NULL DEFAULT 1,
  created_at          TEXT NOT NULL,
  updated_at          TEXT NOT NULL
);
CREATE INDEX webhook_endpoints_listing ON webhook_endpoints (created_at DESC, id DESC);

-- The outbox: every change writes its event here in the same batch as the change itself.
-- `enqueued_at` is set once the event reached the queue; the sweep re-sends rows where it is null.
CREATE TABLE events (
  id           TEXT PRIMARY KEY,             -- evt_…
  type         TEXT NOT NULL,
  account_id   TEXT,
  data_json    TEXT NOT NULL,
  created_at   TEXT NOT NULL,
  enqueued_at  TEXT
);
CREATE INDEX events_unsent ON events (enqueued_at, created_at);
CREATE INDEX events_by_account ON events (account_id, created_at);

-- One delivery of one event to one endpoint, with its attempts.
CREATE TABLE webhook_conversations (
  id                TEXT PRIMARY KEY,
  endpoint_id       TEXT NOT NULL,
  event_id          TEXT NOT NULL,
  event_type        TEXT NOT NULL,
  status            TEXT NOT NULL DEFAULT 'pending', -- pending | delivered | retrying | failed | dropped
  attempts          INTEGER NOT NULL DEFAULT 0,
  last_status_code  INTEGER,
  last_error        TEXT,
  next_attempt_at   INTEGER,                 -- ms; set while waiting for a retry
  created_at        TEXT NOT NULL,
  updated_at        TEXT NOT NULL,
  UNIQUE (event_id, endpoint_id)
);
CREATE INDEX webhook_conversations_by_endpoint ON webhook_conversations (endpoint_id, created_at DESC, id DESC);
CREATE INDEX webhook_conversations_due ON webhook_conversations (status, next_attempt_at);

-- Idempotency-Key records for sends and drafts (24 h).
CREATE TABLE idempotency_keys (
  key            TEXT NOT NULL,
  scope          TEXT NOT NULL,              -- e.g. 'POST /emails'
  request_hash   TEXT NOT NULL,
  status         TEXT NOT NULL,              -- in_progress | completed
  response_code  INTEGER,
  response_json  TEXT,
  created_at     INTEGER NOT NULL,           -- ms
  expires_at     INTEGER NOT NULL,           -- ms
  PRIMARY KEY (scope, key)
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);
