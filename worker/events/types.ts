/** The 20 event types of the spec; `trigger_events` is validated against exactly these. */
export const EVENT_TYPES = [
  'email.new',
  'email.new.bounce',
  'email.update',
  'email.delete',
  'email.draft.new',
  'email.draft.delete',
  'email.folder.create',
  'email.folder.update',
  'email.folder.delete',
  'tracking.open',
  'tracking.click',
  'account.add',
  'account.reconnect',
  'account.remove',
  'account.status.running',
  'account.status.errored',
  'account.status.disconnected',
  'account.initial_sync.running',
  'account.initial_sync.completed',
  'account.initial_sync.failed',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];
