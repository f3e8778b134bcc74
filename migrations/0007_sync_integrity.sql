-- Sync integrity.
-- An email left in no folder is marked with the instant it became an orphan, in the same D1 batch that
-- removed its last membership: the set of emails to delete is derivable from D1 alone, so a crash
-- between the two can no longer leave an email in no folder for ever. A move's arriving side clears it.
ALTER TABLE emails ADD COLUMN orphaned_at_ms INTEGER;
CREATE INDEX emails_orphaned ON emails (account_id, orphaned_at_ms) WHERE orphaned_at_ms IS NOT NULL;
-- Emails that were already in no folder (their deletion was pending in the account's object) are due now.
UPDATE emails SET orphaned_at_ms = 0 WHERE NOT EXISTS (SELECT 1 FROM email_folders WHERE email_id = emails.id);

