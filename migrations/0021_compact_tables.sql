-- Membership, participant and threading rows are stored by their primary key alone (WITHOUT ROWID):
-- a rowid table keeps every row twice (the table and its primary-key index); these keep it once.
-- Same columns, keys and indexes; the rows are copied over.

CREATE TABLE email_folders_compact (
  email_id    TEXT NOT NULL REFERENCES emails(id) ON DELETE CASCADE,
  folder_id   TEXT NOT NULL REFERENCES folders(id) ON DELETE CASCADE,
  account_id  TEXT NOT NULL,
  uid         INTEGER NOT NULL,
  seen        INTEGER,
  flagged     INTEGER,
  PRIMARY KEY (email_id, folder_id),
  UNIQUE (folder_id, uid)
) WITHOUT ROWID;
INSERT INTO email_folders_compact (email_id, folder_id, account_id, uid, seen, flagged)
  SELECT email_id, folder_id, account_id, uid, seen, flagged FROM email_folders;
DROP TABLE email_folders;
ALTER TABLE email_folders_compact RENAME TO email_folders;
CREATE INDEX email_folders_by_folder ON email_folders (folder_id, email_id);

CREATE TABLE email_participants_compact (
  email_id    TEXT NOT NULL REFERENCES emails(id) ON DELETE CASCADE,
  account_id  TEXT NOT NULL,
  kind        TEXT NOT NULL,
  address     TEXT NOT NULL,
  PRIMARY KEY (email_id, kind, address)
) WITHOUT ROWID;
INSERT INTO email_participants_compact (email_id, account_id, kind, address)
  SELECT email_id, account_id, kind, address FROM email_participants;
DROP TABLE email_participants;
ALTER TABLE email_participants_compact RENAME TO email_participants;
CREATE INDEX email_participants_lookup ON email_participants (address, account_id, kind, email_id);

CREATE TABLE thread_keys_compact (
  account_id  TEXT NOT NULL,
  key         TEXT NOT NULL,
  email_id    TEXT NOT NULL REFERENCES emails(id) ON DELETE CASCADE,
  PRIMARY KEY (account_id, key, email_id)
) WITHOUT ROWID;
INSERT INTO thread_keys_compact (account_id, key, email_id) SELECT account_id, key, email_id FROM thread_keys;
DROP TABLE thread_keys;
ALTER TABLE thread_keys_compact RENAME TO thread_keys;
CREATE INDEX thread_keys_by_email ON thread_keys (email_id);
