-- The read side: full-text search, conversation threading and the indexes behind the email filters.

-- Full-text search over subject, body and participants. The FTS table is contentless (it keeps only
-- the index, never a second copy of the text) with contentless_delete, so a row is removed by rowid
-- alone. `email_search` maps an email to its FTS rowid: an INTEGER PRIMARY KEY, so the number is
-- stable (an email's implicit rowid may change on VACUUM). Deleting the mapping row removes the
-- index row (trigger), whether it is deleted directly or by the cascade from `emails`.
CREATE VIRTUAL TABLE emails_fts USING fts5(
  subject, body, participants,
  content = '', contentless_delete = 1, tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TABLE email_search (
  rowid       INTEGER PRIMARY KEY,
  email_id    TEXT NOT NULL UNIQUE REFERENCES emails(id) ON DELETE CASCADE,
  account_id  TEXT NOT NULL
);
CREATE INDEX email_search_by_account ON email_search (account_id);
CREATE TRIGGER email_search_unindex AFTER DELETE ON email_search BEGIN
  DELETE FROM emails_fts WHERE rowid = old.rowid;
END;

-- Threading keys: every Message-ID an email names (its own, In-Reply-To, References) and its
-- normalized subject (`subject:` prefix, for the subject fallback). Two emails sharing a key are in
-- the same conversation, even when the message they both name never arrived.
CREATE TABLE thread_keys (
  account_id  TEXT NOT NULL,
  key         TEXT NOT NULL,
  email_id    TEXT NOT NULL REFERENCES emails(id) ON DELETE CASCADE,
  PRIMARY KEY (account_id, key, email_id)
);
CREATE INDEX thread_keys_by_email ON thread_keys (email_id);

-- Email filters: sender (with date ordering) and the two flags lists are most often cut by. The
-- flag indexes are partial (only flagged rows); the query builder writes `unread = 1` literally so
-- SQLite can use them.
CREATE INDEX emails_by_from ON emails (from_address, date_ms DESC, id DESC);
CREATE INDEX emails_unread ON emails (account_id, date_ms DESC, id DESC) WHERE unread = 1;
CREATE INDEX emails_starred ON emails (account_id, date_ms DESC, id DESC) WHERE starred = 1;
CREATE INDEX emails_with_attachments ON emails (account_id, date_ms DESC, id DESC) WHERE has_attachments = 1;
-- Recipient filters start from the participant and need only the email ids (this covers the
-- older (address, account_id) index, which goes).
CREATE INDEX email_participants_lookup ON email_participants (address, account_id, kind, email_id);
DROP INDEX email_participants_by_address;

-- Emails synced before this migration: index what the rows hold (bodies kept in R2 are not read
-- back here), and their Message-ID threading keys.
INSERT INTO email_search (email_id, account_id) SELECT id, account_id FROM emails;
INSERT INTO emails_fts (rowid, subject, body, participants)
  SELECT s.rowid, e.subject, COALESCE(e.body_plain, ''),
         COALESCE((SELECT group_concat(p.address, ' ') FROM email_participants p WHERE p.email_id = e.id), '')
  FROM email_search s JOIN emails e ON e.id = s.email_id;
INSERT OR IGNORE INTO thread_keys (account_id, key, email_id)
  SELECT account_id, message_id, id FROM emails WHERE message_id IS NOT NULL
  UNION SELECT account_id, in_reply_to, id FROM emails WHERE in_reply_to IS NOT NULL
  UNION SELECT e.account_id, r.value, e.id FROM emails e, json_each(e.references_json) r;
