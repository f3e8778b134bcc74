-- Case-insensitive matching for every script, not only ASCII (SQLite's lower() folds ASCII only):
-- the Worker stores the lower-cased text (JavaScript's Unicode-aware toLowerCase) beside the original,
-- and filters match it against the lower-cased input. Rows from before this migration are folded
-- with lower(), ASCII only, until they are written again.
ALTER TABLE emails ADD COLUMN subject_folded TEXT NOT NULL DEFAULT '';
UPDATE emails SET subject_folded = lower(subject);

ALTER TABLE contacts ADD COLUMN display_name_folded TEXT NOT NULL DEFAULT '';
UPDATE contacts SET display_name_folded = lower(display_name);
