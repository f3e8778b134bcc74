-- Threading keys as 8 bytes each: the first 8 bytes of the SHA-256 of the account id and the key
-- (a Message-ID or a normalized subject, worker/threads/threader.ts), so a row needs neither the
-- account nor the key's text, and a subject key keeps no words of a subject. New emails record
-- their keys here; SQL cannot hash the older `thread_keys` rows, which stay where they are and are
-- read and deleted beside these until their emails go.
CREATE TABLE thread_key_hashes (
  key_hash  BLOB NOT NULL,
  email_id  TEXT NOT NULL REFERENCES emails(id) ON DELETE CASCADE,
  PRIMARY KEY (key_hash, email_id)
) WITHOUT ROWID;
CREATE INDEX thread_key_hashes_by_email ON thread_key_hashes (email_id);
