-- Sync writes the sources, large bodies and attachments of a change's new emails as one R2 object
-- (a segment under accounts/<id>/segments/), each email referring to its byte ranges
-- (`<key>#<offset>+<length>`, worker/emails/blobs.ts). A segment is deleted when the last email whose
-- raw source is in it goes: this index answers "does any email still use it" with one range seek.
CREATE INDEX emails_segment_raw ON emails (raw_key) WHERE raw_key GLOB '*/segments/*';
