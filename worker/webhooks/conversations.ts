/**
 * Webhook conversations: one call of one event to one endpoint, with its attempts. The body of the
 * call (the Event envelope) is not stored: it is rebuilt from the event row, the same bytes every time.
 *
 * Statuses: `pending` (not tried yet), `retrying` (waiting for `next_attempt_at`), `delivered`,
 * `failed` (schedule exhausted), `dropped` (endpoint paused or deleted while the call was waiting).
 * While a call is being made, `next_attempt_at` holds a lease (see delivery.ts), so nobody else sends it.
 */
import { completeEmailEvents } from '../emails/event-data.ts';
import { type Envelope, eventEnvelope } from '../events/envelope.ts';
import { isoNow } from '../lib/time.ts';

export type ConversationStatus = 'pending' | 'retrying' | 'delivered' | 'failed' | 'dropped';

/** SQL list of the statuses whose call is still to be made. */
export const WAITING_STATUSES = "('pending', 'retrying')";

/**
 * SQL: drops the waiting calls matching `where` (they are never made later); `set` names the other
 * columns the drop writes (placeholders of `set` come before those of `where`).
 */
export function dropWaitingSql(set: string, where: string): string {
  return `UPDATE webhook_conversations SET status = 'dropped', next_attempt_at = NULL, ${set}
    WHERE status IN ${WAITING_STATUSES} AND ${where}`;
}

/** A conversation joined with its event and its endpoint: everything needed to show or send it. */
export interface DeliveryRow {
  id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  status: ConversationStatus;
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  next_attempt_at: number | null;
  created_at: string;
  updated_at: string;
  event_account_id: string | null;
  event_data_json: string;
  event_created_at: string;
  url: string;
  headers_json: string;
  endpoint_secret: string; // sealed
  endpoint_enabled: number;
}

export const DELIVERY_SELECT = `SELECT c.id, c.endpoint_id, c.event_id, c.event_type, c.status, c.attempts,
    c.last_status_code, c.last_error, c.next_attempt_at, c.created_at, c.updated_at,
    ev.account_id AS event_account_id, ev.data_json AS event_data_json, ev.created_at AS event_created_at,
    we.url, we.headers_json, we.secret AS endpoint_secret, we.enabled AS endpoint_enabled
  FROM webhook_conversations c
  JOIN events ev ON ev.id = c.event_id
  JOIN webhook_endpoints we ON we.id = c.endpoint_id`;

/** Rows read with DELIVERY_SELECT, their event data as it was made (emails/event-data.ts). */
export const completeDeliveryRows = (db: D1Database, rows: DeliveryRow[]): Promise<DeliveryRow[]> =>
  completeEmailEvents(db, rows, 'event_data_json');

/** The Event envelope of a call (events/envelope.ts), the same bytes every time. */
export function envelope(row: DeliveryRow): Envelope {
  return eventEnvelope(
    {
      id: row.event_id,
      type: row.event_type,
      account_id: row.event_account_id,
      data_json: row.event_data_json,
      created_at: row.event_created_at,
    },
    row.endpoint_id,
  );
}

export function presentConversation(row: DeliveryRow) {
  return {
    object: 'WebhookConversation' as const,
    id: row.id,
    endpoint_id: row.endpoint_id,
    event_id: row.event_id,
    event: row.event_type,
    status: row.status,
    attempts: row.attempts,
    last_status_code: row.last_status_code,
    last_error: row.last_error,
    payload: envelope(row).payload,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

/** Pausing or deleting an endpoint drops its waiting calls: they are never sent later. */
export function dropWaitingStatement(db: D1Database, endpointId: string): D1PreparedStatement {
  return db.prepare(dropWaitingSql('updated_at = ?', 'endpoint_id = ?')).bind(isoNow(), endpointId);
}
