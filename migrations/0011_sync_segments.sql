-- Sync writes the sources, large bodies and attachments of a change's new emails as one R2 object
-- (a segment under accounts/<id>/segments/), each email referring to its byte ranges
-- (`<key>#<offset>+<length>`, worker/emails/blobs.ts). A segment is deleted when the last email whose
-- raw source is in it goes: this index answers "does any email still use it" with one range seek.
CREATE INDEX emails_segment_raw ON emails (raw_key) WHERE raw_key GLOB '*/segments/*';

-- Sync writes a change's outbox rows in bulk with their sequence numbers already taken from the
-- counter (one counter update per statement, worker/sync/bulk.ts): the trigger numbers only the rows
-- inserted without one, as every other writer still does.
DROP TRIGGER events_number;
CREATE TRIGGER events_number AFTER INSERT ON events WHEN new.seq IS NULL BEGIN
  UPDATE event_sequence SET last = last + 1 WHERE id = 1;
  UPDATE events SET seq = (SELECT last FROM event_sequence WHERE id = 1) WHERE id = new.id;
END;
