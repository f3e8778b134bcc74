/**
 * Whether an endpoint still wants a call: enabled, subscribed to the event's type, and to its account
 * (an empty `account_ids` means every account), whose account is not being removed. Checked just
 * before each call is made (delivery.ts), with the endpoint's URL, headers and secret read then, and
 * when an endpoint's filters change (routes/webhooks.ts), so a change reaches every call not started.
 */
import { EVENT_OF_LIVE_ACCOUNT } from '../accounts/removed.ts';
import type { Env } from '../env.ts';
import { iso } from '../lib/time.ts';
import { directoryDb } from '../shards/registry.ts';
import { dropWaitingSql } from './conversations.ts';

/** What a call dropped for this reason says in the log. */
export const NO_LONGER_WANTED =
  'dropped: the endpoint was paused, deleted or changed so that it no longer takes this event, or its account was removed';

/** SQL expressions for an endpoint's filters: its columns (`we.…`), or bound values. */
interface EndpointFilters {
  enabled: string;
  triggers: string;
  accounts: string;
}

const ENDPOINT_COLUMNS: EndpointFilters = {
  enabled: 'we.enabled',
  triggers: 'we.trigger_events_json',
  accounts: 'we.account_ids_json',
};

/** SQL: an endpoint with `filters` wants an event of type `type` of account `account` (SQL expressions). */
function endpointWants(filters: EndpointFilters, type: string, account: string): string {
  return `${filters.enabled} = 1
    AND EXISTS (SELECT 1 FROM json_each(${filters.triggers}) WHERE value = ${type})
    AND (json_array_length(${filters.accounts}) = 0 OR EXISTS (SELECT 1 FROM json_each(${filters.accounts}) WHERE value = ${account}))
    AND ${EVENT_OF_LIVE_ACCOUNT(type, account)}`;
}

export interface CurrentEndpoint {
  url: string;
  headers_json: string;
  endpoint_secret: string;
}

/** The endpoint as the directory has it now, if it still wants the call (one D1 query). */
export function currentEndpoint(
  env: Env,
  call: { endpoint_id: string; event_type: string; event_account_id: string | null },
): Promise<CurrentEndpoint | null> {
  return directoryDb(env)
    .prepare(
      `SELECT we.url, we.headers_json, we.secret AS endpoint_secret FROM webhook_endpoints we
       WHERE we.id = ?1 AND ${endpointWants(ENDPOINT_COLUMNS, '?2', '?3')}`,
    )
    .bind(call.endpoint_id, call.event_type, call.event_account_id)
    .first<CurrentEndpoint>();
}

/**
 * Drops the waiting calls in `db` (one mail shard) made before `changedAt` that `endpoint`, as
 * changed then, no longer wants; run on every shard after the change. Calls made since are judged by
 * the endpoint as it is when they are made (a later change may want them again).
 */
export function dropUnwantedStatement(
  db: D1Database,
  endpoint: { id: string; enabled: number; trigger_events_json: string; account_ids_json: string },
  changedAt: number,
): D1PreparedStatement {
  const filters = { enabled: '?4', triggers: '?5', accounts: '?6' };
  return db
    .prepare(
      dropWaitingSql(
        'last_error = ?1, updated_at = ?2',
        `endpoint_id = ?3 AND created_at <= ?2 AND NOT EXISTS (
           SELECT 1 FROM events ev WHERE ev.id = webhook_conversations.event_id
             AND ${endpointWants(filters, 'webhook_conversations.event_type', 'ev.account_id')})`,
      ),
    )
    .bind(
      NO_LONGER_WANTED,
      iso(changedAt),
      endpoint.id,
      endpoint.enabled,
      endpoint.trigger_events_json,
      endpoint.account_ids_json,
    );
}
