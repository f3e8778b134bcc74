-- The events feed (GET /events) and its ordering.

-- Every event gets a sequence number in commit order: D1 has one writer, so a reader never sees
-- number n + 1 before n, and `after=evt_…` resumes exactly where a subscriber stopped. The number
-- comes from a counter row rather than MAX(seq) + 1, so it never repeats, even after the newest
-- rows were deleted (an undone connect, pruning), and rowid is not used because VACUUM may renumber it.
ALTER TABLE events ADD COLUMN seq INTEGER;
UPDATE events SET seq = ordered.n
  FROM (SELECT id, ROW_NUMBER() OVER (ORDER BY created_at, rowid) AS n FROM events) AS ordered
  WHERE ordered.id = events.id;
CREATE UNIQUE INDEX events_seq ON events (seq);
CREATE INDEX events_account_seq ON events (account_id, seq);
-- Pruning after 30 days walks this one.
CREATE INDEX events_created ON events (created_at);

CREATE TABLE event_sequence (
  id    INTEGER PRIMARY KEY CHECK (id = 1),
  last  INTEGER NOT NULL
);
INSERT INTO event_sequence (id, last) SELECT 1, COALESCE(MAX(seq), 0) FROM events;

CREATE TRIGGER events_number AFTER INSERT ON events BEGIN
  UPDATE event_sequence SET last = last + 1 WHERE id = 1;
  UPDATE events SET seq = (SELECT last FROM event_sequence WHERE id = 1) WHERE id = new.id;
END;

-- GET /contacts without account_id: every account's contacts, most recent first.
CREATE INDEX contacts_all_recent ON contacts (last_email_ms DESC, identifier, account_id);

-- POST /emails with draft_id finds the saved draft.
CREATE INDEX emails_by_draft ON emails (draft_id) WHERE draft_id IS NOT NULL;
