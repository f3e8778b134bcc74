-- Emails that a folder's whole membership left (the folder was deleted on the server, or its re-read
-- after a renumbering did not find them again) while they stay filed in another folder. Their
-- folders, role and flags are refreshed, with one email.update each, by the account's alarm in
-- bounded steps (worker/sync/departures.ts), so a folder of any size leaves in one small batch.
CREATE TABLE folder_departures (
  email_id    TEXT NOT NULL REFERENCES emails(id) ON DELETE CASCADE,
  folder_id   TEXT NOT NULL,  -- the folder it left (whose row may be gone)
  account_id  TEXT NOT NULL,
  PRIMARY KEY (email_id, folder_id)
) WITHOUT ROWID;
CREATE INDEX folder_departures_by_account ON folder_departures (account_id);
