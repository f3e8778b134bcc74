-- An email's number: a small integer, unique in its database, that the rows about an email key on
-- instead of its 32-character id. Its participants, its threading keys and its full-text index row
-- are then a few bytes of key each, and the search index's rowid is the number itself (no
-- `email_search` row). Numbers are given at insert (worker/sync/new-mail.ts), each above the last;
-- the first a million above the highest `email_search` rowid, which an older Worker still running
-- during the deploy would go on counting from: an index row never names two emails.
--
-- Emails stored before keep a null number and their rows in `email_participants`,
-- `thread_key_hashes` and `email_search`: D1 runs a statement for at most 30 seconds, so a full
-- database cannot be rewritten here. Readers look in both until those emails go.
ALTER TABLE emails ADD COLUMN num INTEGER;
CREATE UNIQUE INDEX emails_by_num ON emails (num) WHERE num IS NOT NULL;

-- The addresses an email names, by kind (from | to | cc | bcc), lower-cased, with the number of
-- the email's account (`account_numbers`): for the address filters and the contacts' counts.
CREATE TABLE participants (
  num          INTEGER NOT NULL,
  kind         TEXT NOT NULL,
  address      TEXT NOT NULL,
  account_num  INTEGER NOT NULL,
  PRIMARY KEY (num, kind, address)
) WITHOUT ROWID;
CREATE INDEX participants_by_address ON participants (address, account_num, kind);

-- Threading keys (worker/threads/threader.ts): 8 bytes of SHA-256 of the account and the key.
CREATE TABLE thread_key_numbers (
  key_hash  BLOB NOT NULL,
  num       INTEGER NOT NULL,
  PRIMARY KEY (key_hash, num)
) WITHOUT ROWID;
CREATE INDEX thread_key_numbers_by_num ON thread_key_numbers (num);

-- Each account's number in this database, given with its first participant rows: the rows name
-- their account by it, so the address filters of one account read only that account's rows.
CREATE TABLE account_numbers (
  account_id  TEXT PRIMARY KEY,
  num         INTEGER NOT NULL UNIQUE
);
