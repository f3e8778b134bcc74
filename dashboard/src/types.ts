/** The API's objects, as far as the dashboard reads them (mailbox-api.md, DECISIONS.md). */
export interface ApiKey {
  id: string;
  name: string;
  prefix: string;
  issued_at: string;
  last_used_at: string | null;
  key?: string;
}

export interface Account {
  id: string;
  email: string;
  display_name: string | null;
  status: 'running' | 'errored' | 'disconnected';
  initial_sync: 'none' | 'running' | 'completed' | 'failed';
  initial_sync_enable: boolean;
  initial_sync_days: number | null;
  created_at: string;
  connected_at: string | null;
  last_error: string | null;
}

export interface Endpoint {
  id: string;
  url: string;
  description: string;
  trigger_events: string[];
  account_ids: string[];
  secret: string;
  enabled: boolean;
  created_at: string;
}

export interface Conversation {
  id: string;
  event_id: string;
  event: string;
  status: string;
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  created_at: string;
  updated_at: string;
}

export interface Folder {
  id: string;
  name: string;
  role: string;
  provider_id: string;
  total_count: number;
}

export interface Attendee {
  identifier: string;
  display_name: string;
}

export interface Attachment {
  id: string;
  name: string;
  size: number;
  mime: string;
  cid: string;
  inline: boolean;
}

export interface EmailSummary {
  id: string;
  account_id: string;
  date: string;
  subject: string;
  snippet: string;
  from_attendee: Attendee;
  unread: boolean;
  starred: boolean;
  has_attachments: boolean;
}

export interface Email {
  id: string;
  account_id: string;
  date: string;
  subject: string;
  body: string;
  body_plain: string;
  from_attendee: Attendee;
  to_attendees: Attendee[];
  cc_attendees: Attendee[];
  attachments: Attachment[];
  headers: { name: string; value: string }[];
}

export interface Gateway {
  id: string;
  accounts_held: number;
  capacity: number;
  connected: boolean;
  connected_at: string;
  last_heartbeat_at: string;
  version: string | null;
}

export interface Database {
  binding: string;
  size_bytes: number;
  limit_bytes: number;
  emails: number;
  accounts: number;
}
