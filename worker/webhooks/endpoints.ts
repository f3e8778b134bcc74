/** Webhook endpoints: their fields' rules, how a row is stored and how it is shown. */
import type { SecretKeys } from '../lib/crypto.ts';
import { NOT_REMOVED } from '../accounts/removed.ts';
import { z } from 'zod';
import { EVENT_TYPES, type EventType } from '../events/types.ts';
import type { WebhookEndpoint } from '../schemas/webhooks.ts';
import { notFound } from '../lib/errors.ts';
import { parseId } from '../lib/ids.ts';
import type { Env } from '../env.ts';
import { placeholders } from '../lib/sql.ts';
import { directoryDb } from '../shards/registry.ts';
import { anyCase, singleLine } from '../lib/validation.ts';
import { openEndpointSecret } from './signing.ts';
import { webhookUrlProblem } from './url.ts';

export interface EndpointRow {
  id: string;
  url: string;
  description: string;
  trigger_events_json: string;
  account_ids_json: string;
  headers_json: string;
  secret: string; // sealed
  enabled: number;
  created_at: string;
  updated_at: string;
}

/** What the consumer needs of an enabled endpoint: its filters, and what a call is made with. */
export type EnabledEndpoint = Pick<
  EndpointRow,
  'id' | 'url' | 'headers_json' | 'trigger_events_json' | 'account_ids_json'
> & {
  endpoint_secret: string; // sealed
};

/**
 * The enabled endpoints, read from the directory at most once per consumer invocation (a workspace
 * has a few): fan-out matches events with them and claims take each call's URL, headers and secret
 * from them. Whether an endpoint still wants a call is read again just before the call (audience.ts).
 */
export function enabledEndpoints(env: Env): () => Promise<Map<string, EnabledEndpoint>> {
  let read: Promise<Map<string, EnabledEndpoint>> | null = null;
  return () =>
    (read ??= directoryDb(env)
      .prepare(
        `SELECT id, url, headers_json, trigger_events_json, account_ids_json, secret AS endpoint_secret
         FROM webhook_endpoints WHERE enabled = 1`,
      )
      .all<EnabledEndpoint>()
      .then(({ results }) => new Map(results.map((e) => [e.id, e]))));
}

export interface EndpointHeader {
  key: string;
  value: string;
}

/** Headers every call sets itself, and hop-by-hop headers that are not the endpoint's to choose. */
const RESERVED_HEADER =
  /^(content-type|content-length|content-encoding|host|connection|keep-alive|transfer-encoding|te|trailer|upgrade|expect|proxy-.*|webhook-.*|x-email-engine-signature)$/i;
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/; // an RFC 9110 token

const unique = <T>(items: T[]): T[] => [...new Set(items)];

const header = z.strictObject({
  key: z
    .string()
    .max(100, 'must be at most 100 characters')
    .regex(HEADER_NAME, 'must be a valid HTTP header name')
    .refine((key) => !RESERVED_HEADER.test(key), 'is a header the service sets itself (or a hop-by-hop header)'),
  value: singleLine('a header value').max(2000, 'must be at most 2000 characters'),
});

/** The endpoint's settable fields; `allowPrivateUrls` comes from ALLOW_PRIVATE_WEBHOOK_URLS. */
function endpointFields(allowPrivateUrls: boolean) {
  return {
    url: z.string().superRefine((url, ctx) => {
      const problem = webhookUrlProblem(url, allowPrivateUrls);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    }),
    description: z.string().max(500, 'must be at most 500 characters'),
    trigger_events: z
      .array(anyCase(EVENT_TYPES, (input) => `unknown event type ${JSON.stringify(input)}`))
      .min(1, 'must name at least one event type')
      .transform(unique),
    account_ids: z.array(z.string()).max(100, 'must hold at most 100 account ids').transform(unique),
    headers: z
      .array(header)
      .max(20, 'must hold at most 20 headers')
      .refine(
        (list) => unique(list.map((h) => h.key.toLowerCase())).length === list.length,
        'must not repeat a header',
      ),
    enabled: z.boolean(),
  };
}

export function createEndpointBody(allowPrivateUrls: boolean) {
  const f = endpointFields(allowPrivateUrls);
  return z.strictObject({
    url: f.url,
    description: f.description.default(''),
    trigger_events: f.trigger_events,
    account_ids: f.account_ids.default([]),
    headers: f.headers.default([]),
    enabled: f.enabled.default(true),
  });
}

export function patchEndpointBody(allowPrivateUrls: boolean) {
  return z.strictObject(endpointFields(allowPrivateUrls)).partial();
}

export type EndpointFields = z.output<ReturnType<typeof createEndpointBody>>;

/** The columns that store the given fields (only those given: a PATCH changes nothing else). */
export function endpointColumns(fields: Partial<EndpointFields>): Record<string, string | number> {
  const columns: Record<string, string | number> = {};
  if (fields.url !== undefined) columns.url = fields.url;
  if (fields.description !== undefined) columns.description = fields.description;
  if (fields.trigger_events !== undefined) columns.trigger_events_json = JSON.stringify(fields.trigger_events);
  if (fields.account_ids !== undefined) columns.account_ids_json = JSON.stringify(fields.account_ids);
  if (fields.headers !== undefined) columns.headers_json = JSON.stringify(fields.headers);
  if (fields.enabled !== undefined) columns.enabled = fields.enabled ? 1 : 0;
  return columns;
}

/** Every id in `account_ids` must name an existing account (DECISIONS.md: ids a body refers to). */
export async function assertAccountsExist(db: D1Database, accountIds: string[] | undefined): Promise<void> {
  if (!accountIds?.length) return;
  const malformed = accountIds.find((id) => parseId('account', id) === null);
  if (malformed !== undefined) throw notFound(`Account ${JSON.stringify(malformed)} (account_ids)`);
  const { results } = await db
    .prepare(`SELECT id FROM accounts WHERE id IN (${placeholders(accountIds.length)}) AND ${NOT_REMOVED}`)
    .bind(...accountIds)
    .all<{ id: string }>();
  const found = new Set(results.map((r) => r.id));
  const missing = accountIds.find((id) => !found.has(id));
  if (missing !== undefined) throw notFound(`Account ${missing} (account_ids)`);
}

export async function loadEndpoint(db: D1Database, rawId: string | undefined): Promise<EndpointRow> {
  const id = parseId('endpoint', rawId);
  const row = id
    ? await db.prepare('SELECT * FROM webhook_endpoints WHERE id = ?').bind(id).first<EndpointRow>()
    : null;
  if (!row) throw notFound('Webhook endpoint');
  return row;
}

export async function presentEndpoint(row: EndpointRow, keys: SecretKeys): Promise<WebhookEndpoint> {
  return {
    object: 'WebhookEndpoint' as const,
    id: row.id,
    url: row.url,
    description: row.description,
    trigger_events: JSON.parse(row.trigger_events_json) as EventType[],
    account_ids: JSON.parse(row.account_ids_json) as string[],
    headers: JSON.parse(row.headers_json) as EndpointHeader[],
    secret: await openEndpointSecret(keys, row.id, row.secret),
    enabled: row.enabled === 1,
    created_at: row.created_at,
  };
}
