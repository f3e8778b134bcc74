-- Scheduled sends (POST /emails with send_at). The account's object decides when each goes and
-- whether a cancel came first; this table is what the API lists (newest first per account, or
-- across accounts) and what the retention sweep and the account's purge delete.
CREATE TABLE scheduled_emails (
  id TEXT PRIMARY KEY,
  account_id TEXT NOT NULL,
  send_at TEXT NOT NULL,
  created_at TEXT NOT NULL,
  message_id TEXT NOT NULL,
  subject TEXT,
  to_json TEXT NOT NULL,
  status TEXT NOT NULL,
  error TEXT,
  ended_at_ms INTEGER
);
CREATE INDEX scheduled_emails_by_account ON scheduled_emails (account_id, id);
CREATE INDEX scheduled_emails_ended ON scheduled_emails (ended_at_ms) WHERE ended_at_ms IS NOT NULL;
