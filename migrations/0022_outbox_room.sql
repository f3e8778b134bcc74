-- An outbox row is written once and then marked twice (`enqueued_at`, `fanned_out_at`, 24 bytes
-- each). Growing rows split the full pages they sit on, which left the table about half empty.
-- `room` holds those 48 bytes from the start and gives them up as the marks are set
-- (events/outbox.ts, webhooks/fanout.ts): a row keeps its size, and pages stay full.
ALTER TABLE events ADD COLUMN room BLOB DEFAULT x'000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000';
