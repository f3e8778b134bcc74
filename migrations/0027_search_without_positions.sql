-- The full-text index keeps which emails hold a word, not where in them (FTS5 `detail=none`): a
-- search requires every word of its text (worker/emails/search.ts) and never a phrase, so the
-- positions took most of the index for nothing. The index is contentless and so cannot be rebuilt
-- from itself: the one from before stays, renamed, for the emails it indexed; searches look in both,
-- and removing an email's `email_search` row removes it from either.
ALTER TABLE emails_fts RENAME TO emails_fts_positions;
CREATE VIRTUAL TABLE emails_fts USING fts5(
  subject, body, participants,
  content = '', contentless_delete = 1, detail = none, tokenize = 'unicode61 remove_diacritics 2'
);
DROP TRIGGER IF EXISTS email_search_unindex;
CREATE TRIGGER email_search_unindex AFTER DELETE ON email_search BEGIN
  DELETE FROM emails_fts WHERE rowid = old.rowid;
  DELETE FROM emails_fts_positions WHERE rowid = old.rowid;
END;
