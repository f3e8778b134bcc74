-- Contacts are stored by their primary key alone (WITHOUT ROWID), as memberships, participants and
-- thread keys are (0021): one b-tree instead of a table and its primary-key index. Same columns,
-- key and indexes; the rows are copied over.
CREATE TABLE contacts_compact (
  account_id           TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  identifier           TEXT NOT NULL,
  display_name         TEXT NOT NULL DEFAULT '',
  emails_count         INTEGER NOT NULL DEFAULT 0,
  last_email_at        TEXT NOT NULL,
  last_email_ms        INTEGER NOT NULL,
  display_name_folded  TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (account_id, identifier)
) WITHOUT ROWID;
INSERT INTO contacts_compact (account_id, identifier, display_name, emails_count, last_email_at, last_email_ms, display_name_folded)
  SELECT account_id, identifier, display_name, emails_count, last_email_at, last_email_ms, display_name_folded FROM contacts;
DROP TABLE contacts;
ALTER TABLE contacts_compact RENAME TO contacts;
CREATE INDEX contacts_recent ON contacts (account_id, last_email_ms DESC, identifier);
CREATE INDEX contacts_all_recent ON contacts (last_email_ms DESC, identifier, account_id);
