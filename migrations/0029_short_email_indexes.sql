-- Shorter entries in two indexes every synced email has a row in.
--
-- A segment is in use while some email's raw source is a range of it (worker/emails/blobs.ts): the
-- index keeps the first 16 characters of the segment's digest (64 bits) instead of the whole
-- reference, about a hundred bytes; the query checks the reference itself on the rows it finds.
DROP INDEX IF EXISTS emails_segment_raw;
CREATE INDEX emails_segment_digest ON emails (substr(raw_key, instr(raw_key, '/segments/') + 10, 16))
  WHERE raw_key GLOB '*/segments/*';
-- A folder's memberships are found by (folder_id, uid), whose index holds the email id too: the
-- (folder_id, email_id) index repeated it.
DROP INDEX IF EXISTS email_folders_by_folder;
