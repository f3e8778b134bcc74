/**
 * Whether an endpoint still wants a call: enabled, subscribed to the event's type, and to its account
 * (an empty `account_ids` means every account), whose account is not being removed. Checked just
 * before each call is made (delivery.ts), with the endpoint's URL, headers and secret read then, and
 * when an endpoint's filters change (routes/webhooks.ts), so a change reaches every call not started.
 */
import { EVENT_OF_LIVE_ACCOUNT } from '../accounts/removed.ts';
import { iso } from '../lib/time.ts';
import { dropWaitingSql } from './conversations.ts';

/** What a call dropped for this reason says in the log. */
export const NO_LONGER_WANTED =
  'dropped: the endpoint was paused, deleted or changed so that it no longer takes this event, or its account was removed';

/** SQL: endpoint `we` wants an event of type `type` of account `account` (SQL expressions). */
export function endpointWants(type: string, account: string): string {
  return `we.enabled = 1
    AND EXISTS (SELECT 1 FROM json_each(we.trigger_events_json) WHERE value = ${type})
    AND (json_array_length(we.account_ids_json) = 0 OR EXISTS (SELECT 1 FROM json_each(we.account_ids_json) WHERE value = ${account}))
    AND ${EVENT_OF_LIVE_ACCOUNT(type, account)}`;
}

export interface CurrentEndpoint {
  url: string;
  headers_json: string;
  endpoint_secret: string;
}

/** The endpoint as it is now, if it still wants the call (one D1 query). */
export function currentEndpoint(
  db: D1Database,
  call: { endpoint_id: string; event_type: string; event_account_id: string | null },
): Promise<CurrentEndpoint | null> {
  return db
    .prepare(
      `SELECT we.url, we.headers_json, we.secret AS endpoint_secret FROM webhook_endpoints we
       WHERE we.id = ?1 AND ${endpointWants('?2', '?3')}`,
    )
    .bind(call.endpoint_id, call.event_type, call.event_account_id)
    .first<CurrentEndpoint>();
}

/** Drops an endpoint's waiting calls that it no longer wants (after its filters changed). */
export function dropUnwantedStatement(db: D1Database, endpointId: string, now: number): D1PreparedStatement {
  return db
    .prepare(
      dropWaitingSql(
        'last_error = ?1, updated_at = ?2',
        `endpoint_id = ?3 AND NOT EXISTS (
           SELECT 1 FROM webhook_endpoints we JOIN events ev ON ev.id = webhook_conversations.event_id
           WHERE we.id = webhook_conversations.endpoint_id AND ${endpointWants('webhook_conversations.event_type', 'ev.account_id')})`,
      ),
    )
    .bind(NO_LONGER_WANTED, iso(now), endpointId);
}
