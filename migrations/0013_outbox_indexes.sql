-- Two indexes of the outbox that no query uses any more, each written for every event (and
-- `events_unsent` again when the event is marked enqueued): the sweep finds unsent events through
-- `events_unfanned` (0008), the feed reads by `events_seq` and `events_account_seq` (0010), and the
-- retention cut by `events_created`. Fewer rows are written per new email.
DROP INDEX IF EXISTS events_unsent;
DROP INDEX IF EXISTS events_by_account;
