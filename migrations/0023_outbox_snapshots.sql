-- An email event's outbox row holds a snapshot of its email (worker/emails/event-data.ts); once the
-- email is gone, its email.delete (or email.draft.delete) stands in for it, found by the email's id.
CREATE INDEX events_deleted_email ON events (json_extract(data_json, '$.id'))
  WHERE type IN ('email.delete', 'email.draft.delete');
