/** Everything besides mail: API keys, accounts, webhooks, events, the reference itself, tracking links. */
import { z } from 'zod';
import { AuthIntentBody } from '../accounts/connect.ts';
import { EventListQuery } from '../events/feed.ts';
import { offsetPaging } from '../lib/paging.ts';
import { PatchAccountBody } from '../routes/accounts.ts';
import { CreateApiKeyBody } from '../routes/api-keys.ts';
import { ConversationListQuery } from '../routes/webhooks.ts';
import { Account, AccountDeleted, Accounts, ApiKeyCreated, ApiKeyDeleted, ApiKeys } from '../schemas/accounts.ts';
import { Success } from '../schemas/common.ts';
import { Event, Events } from '../schemas/events.ts';
import { Databases } from '../schemas/databases.ts';
import { Gateways } from '../schemas/gateways.ts';
import { WebhookConversation, WebhookConversations, WebhookEndpoint, WebhookEndpoints } from '../schemas/webhooks.ts';
import { createEndpointBody, patchEndpointBody } from '../webhooks/endpoints.ts';
import type { Operation } from './operation.ts';

export const ACCOUNT_OPERATIONS: Operation[] = [
  // API keys
  {
    method: 'post',
    path: '/api-keys',
    operationId: 'createApiKey',
    tag: 'API keys',
    summary: 'Create an API key',
    description: 'The key is in this answer only; it is stored as a hash.',
    body: { schema: CreateApiKeyBody, name: 'CreateApiKeyRequest', example: { name: 'my app' } },
    ok: ApiKeyCreated,
    errors: [400],
  },
  {
    method: 'get',
    path: '/api-keys',
    operationId: 'listApiKeys',
    tag: 'API keys',
    summary: 'List API keys',
    description: 'Never returns the keys themselves; revoked keys are not listed.',
    query: offsetPaging,
    ok: ApiKeys,
    errors: [400],
  },
  {
    method: 'delete',
    path: '/api-keys/{id}',
    operationId: 'revokeApiKey',
    tag: 'API keys',
    summary: 'Revoke an API key',
    description: 'The key stops working at once.',
    ok: ApiKeyDeleted,
    errors: [404],
  },
  // Accounts
  {
    method: 'post',
    path: '/auth/intent',
    operationId: 'connectAccount',
    tag: 'Accounts',
    summary: 'Connect (or reconnect) a mailbox',
    description:
      'Logs in to IMAP and SMTP before answering. Well-known providers need no host settings; Gmail takes an app password. With `account_id`, reconnects that account (`account.reconnect`); otherwise `account.add` follows.',
    body: {
      schema: AuthIntentBody,
      name: 'AuthIntentRequest',
      example: { provider: 'imap', email: 'me@gmail.com', password: 'app-password', state: 'user-42' },
    },
    ok: Account,
    errors: [400, 401, 404, 409, 502],
  },
  {
    method: 'get',
    path: '/accounts',
    operationId: 'listAccounts',
    tag: 'Accounts',
    summary: 'List accounts',
    query: offsetPaging,
    ok: Accounts,
    errors: [400],
  },
  {
    method: 'get',
    path: '/accounts/{id}',
    operationId: 'getAccount',
    tag: 'Accounts',
    summary: 'Get an account',
    ok: Account,
    errors: [404],
  },
  {
    method: 'patch',
    path: '/accounts/{id}',
    operationId: 'updateAccount',
    tag: 'Accounts',
    summary: "Change an account's metadata or display name",
    body: { schema: PatchAccountBody, name: 'UpdateAccountRequest', example: { metadata: { plan: 'pro' } } },
    ok: Account,
    errors: [400, 404],
  },
  {
    method: 'delete',
    path: '/accounts/{id}',
    operationId: 'deleteAccount',
    tag: 'Accounts',
    summary: 'Remove an account',
    description:
      'Syncing stops; its emails, folders and attachments vanish from the API; `account.remove` follows. Nothing is deleted in the mailbox.',
    ok: AccountDeleted,
    errors: [404],
  },
];

export const SERVICE_OPERATIONS: Operation[] = [
  // Webhooks
  {
    method: 'post',
    path: '/webhooks/endpoints',
    operationId: 'createWebhookEndpoint',
    tag: 'Webhooks',
    summary: 'Create a webhook endpoint',
    body: {
      schema: createEndpointBody(false),
      name: 'CreateWebhookEndpointRequest',
      example: { url: 'https://hooks.example.com/mail', trigger_events: ['email.new', 'email.update'] },
    },
    ok: WebhookEndpoint,
    errors: [400, 404],
  },
  {
    method: 'get',
    path: '/webhooks/endpoints',
    operationId: 'listWebhookEndpoints',
    tag: 'Webhooks',
    summary: 'List webhook endpoints',
    query: offsetPaging,
    ok: WebhookEndpoints,
    errors: [400],
  },
  {
    method: 'get',
    path: '/webhooks/endpoints/{id}',
    operationId: 'getWebhookEndpoint',
    tag: 'Webhooks',
    summary: 'Get a webhook endpoint',
    ok: WebhookEndpoint,
    errors: [404],
  },
  {
    method: 'patch',
    path: '/webhooks/endpoints/{id}',
    operationId: 'updateWebhookEndpoint',
    tag: 'Webhooks',
    summary: 'Change a webhook endpoint',
    description:
      'Only the fields given change; id and secret stay. Pausing (`enabled: false`) drops the calls waiting.',
    body: { schema: patchEndpointBody(false), name: 'UpdateWebhookEndpointRequest', example: { enabled: false } },
    ok: WebhookEndpoint,
    errors: [400, 404],
  },
  {
    method: 'delete',
    path: '/webhooks/endpoints/{id}',
    operationId: 'deleteWebhookEndpoint',
    tag: 'Webhooks',
    summary: 'Delete a webhook endpoint',
    ok: Success,
    errors: [404],
  },
  {
    method: 'get',
    path: '/webhooks/conversations',
    operationId: 'listWebhookConversations',
    tag: 'Webhooks',
    summary: 'Delivery log of one endpoint',
    description: 'Newest first.',
    query: ConversationListQuery,
    ok: WebhookConversations,
    errors: [400, 404],
  },
  {
    method: 'post',
    path: '/webhooks/conversations/{id}/retry',
    operationId: 'retryWebhookConversation',
    tag: 'Webhooks',
    summary: 'Send a call again now',
    description: 'Counts as an attempt; success ends the schedule, failure leaves it running.',
    ok: WebhookConversation,
    errors: [400, 404],
  },
  // Events
  {
    method: 'get',
    path: '/events',
    operationId: 'listEvents',
    tag: 'Events',
    summary: 'The events feed',
    description:
      'Every event the service emitted, oldest first in the order they were committed, with the ids and envelopes of the webhook calls (`endpoint_id` null). A subscriber that was down asks for everything `after` the last event it processed and misses nothing. Events are kept 30 days.',
    query: EventListQuery,
    ok: Events,
    errors: [400],
  },
  {
    method: 'get',
    path: '/events/{id}',
    operationId: 'getEvent',
    tag: 'Events',
    summary: 'Get an event',
    ok: Event,
    errors: [404],
  },
  // Gateways
  {
    method: 'get',
    path: '/gateways',
    operationId: 'listGateways',
    tag: 'Gateways',
    summary: 'List the live gateways',
    description:
      'Every gateway heard from within a lease time (`GATEWAY_LEASE_TTL_SECONDS`), with the accounts it holds, its capacity, its last heartbeat and its version. A gateway that stops cleanly leaves the list at once; one that dies leaves it after a lease time.',
    ok: Gateways,
    errors: [],
  },
  {
    method: 'get',
    path: '/databases',
    operationId: 'listDatabases',
    tag: 'Gateways',
    summary: 'How full the databases are',
    description:
      "The workspace's D1 database: the bytes it takes against Cloudflare's 10 GB limit, and the emails and accounts it holds. How many emails fit: docs/capacity.md.",
    ok: Databases,
    errors: [],
  },
  // The reference itself (public)
  {
    method: 'get',
    path: '/openapi.json',
    public: true,
    operationId: 'getOpenApiDocument',
    tag: 'Reference',
    summary: 'This document',
    description: 'OpenAPI 3.1, generated from the schemas that validate requests and shape answers.',
    ok: { mediaType: 'application/json', description: 'The OpenAPI document.', schema: { type: 'object' } },
    errors: [],
  },
  {
    method: 'get',
    path: '/docs',
    public: true,
    operationId: 'getReference',
    tag: 'Reference',
    summary: 'The API reference as a web page',
    ok: { mediaType: 'text/html', description: 'HTML rendered from this document (no scripts).' },
    errors: [],
  },
  {
    method: 'get',
    path: '/docs/style.css',
    public: true,
    operationId: 'getReferenceStylesheet',
    tag: 'Reference',
    summary: "The reference page's stylesheet",
    ok: { mediaType: 'text/css', description: 'CSS.' },
    errors: [],
  },
  // Tracking (public, outside /api/v1)
  {
    method: 'get',
    path: '/t/open/{tracking_id}',
    base: '',
    public: true,
    operationId: 'trackOpen',
    tag: 'Tracking',
    summary: 'Open pixel of a tracked email',
    description: 'Signed links only; records `tracking.open`. An unsigned or altered link is a 404.',
    query: z.object({ s: z.string().meta({ description: 'The signature.' }) }),
    ok: { mediaType: 'image/gif', description: 'A transparent 1×1 GIF.' },
    errors: [404],
  },
  {
    method: 'get',
    path: '/t/click/{tracking_id}',
    base: '',
    public: true,
    operationId: 'trackClick',
    tag: 'Tracking',
    summary: 'Click redirect of a tracked email',
    description: 'Signed links only; records `tracking.click` and redirects to the link.',
    query: z.object({
      u: z.string().meta({ description: 'The link (http or https).' }),
      s: z.string().meta({ description: 'The signature.' }),
    }),
    ok: { mediaType: 'text/plain', description: 'A redirect to `u` (Location header).' },
    okStatus: 302,
    errors: [404],
  },
];
