-- The subject filter is case-insensitive for every script, not only ASCII (SQLite's lower() folds
-- ASCII only): the subject is stored lower-cased by the Worker (JavaScript's Unicode-aware
-- toLowerCase) and matched against the lower-cased filter. Rows from before this migration are
-- folded with lower(), ASCII only, until they are synced again.
ALTER TABLE emails ADD COLUMN subject_folded TEXT NOT NULL DEFAULT '';
UPDATE emails SET subject_folded = lower(subject);
