/**
 * The Event envelope, one shape for webhook calls and for the events feed (GET /events):
 * `{object: Event, id, type, created_at, account_id, endpoint_id, data}`, cut to 64 KB by dropping
 * `body`/`body_plain` of an email when it is larger (DECISIONS.md, "Webhook calls").
 */
import { MAX_EVENT_PAYLOAD_BYTES, withoutBodies } from '../emails/events.ts';

/** An outbox row as stored. */
export interface StoredEvent {
  id: string;
  type: string;
  account_id: string | null;
  data_json: string;
  created_at: string;
}

export interface Envelope {
  payload: EventEnvelope;
  /** The exact bytes sent and signed. */
  body: string;
}

export interface EventEnvelope {
  object: 'Event';
  id: string;
  type: string;
  created_at: string;
  account_id: string | null;
  endpoint_id: string | null;
  data: unknown;
}

/** `endpointId`: the endpoint a webhook call goes to; null in the feed. */
export function eventEnvelope(event: StoredEvent, endpointId: string | null): Envelope {
  const make = (data: unknown): Envelope => {
    const payload: EventEnvelope = {
      object: 'Event',
      id: event.id,
      type: event.type,
      created_at: event.created_at,
      account_id: event.account_id,
      endpoint_id: endpointId,
      data,
    };
    return { payload, body: JSON.stringify(payload) };
  };
  const data = JSON.parse(event.data_json) as unknown;
  const full = make(data);
  if (new TextEncoder().encode(full.body).length <= MAX_EVENT_PAYLOAD_BYTES) return full;
  return make(withoutBodies(data));
}
