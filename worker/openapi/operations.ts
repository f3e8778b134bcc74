/**
 * Every operation the API serves, described with the zod schemas the routes validate with and the
 * response schemas the presenters are typed by. worker/openapi/document.ts turns this list into the
 * OpenAPI 3.1 document; test/node/openapi.test.ts checks it against the routes Hono serves.
 */
import { z } from 'zod';
import { AuthIntentBody } from '../accounts/connect.ts';
import { ContactListQuery } from '../contacts/list.ts';
import { DraftListQuery, EmailListQuery } from '../emails/query.ts';
import { EventListQuery } from '../events/feed.ts';
import { offsetPaging } from '../lib/paging.ts';
import { PatchAccountBody } from '../routes/accounts.ts';
import { ModifyBody } from '../routes/actions.ts';
import { CreateApiKeyBody } from '../routes/api-keys.ts';
import { FolderListQuery } from '../routes/folders.ts';
import { ThreadQuery } from '../routes/threads.ts';
import { ConversationListQuery } from '../routes/webhooks.ts';
import {
  Account,
  AccountDeleted,
  Accounts,
  ApiKeyCreated,
  ApiKeyDeleted,
  ApiKeys,
  Contacts,
} from '../schemas/accounts.ts';
import { Success } from '../schemas/common.ts';
import { DraftCreated, Drafts, Email, EmailDeleted, Emails, EmailSent, Thread } from '../schemas/emails.ts';
import { Event, Events } from '../schemas/events.ts';
import { Folder, Folders } from '../schemas/folders.ts';
import { WebhookConversation, WebhookConversations, WebhookEndpoint, WebhookEndpoints } from '../schemas/webhooks.ts';
import { ComposeBody } from '../send/compose.ts';
import { createEndpointBody, patchEndpointBody } from '../webhooks/endpoints.ts';

export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

export interface Operation {
  method: Method;
  /** The path as Hono routes it, below the operation's base (`/api/v1` unless `base` says otherwise). */
  path: string;
  base?: '/api/v1' | '';
  operationId: string;
  tag: string;
  summary: string;
  description?: string;
  /** Public: no X-API-KEY. */
  public?: true;
  query?: z.ZodObject;
  /** A JSON body; `multipart` adds multipart/form-data with the same fields (files in `attachments`). */
  body?: { schema: z.ZodType; name: string; multipart?: true; example?: unknown };
  /** The success answer (200 unless `okStatus`): a JSON schema, or another media type (bytes). */
  ok: z.ZodType | { mediaType: string; description: string; schema?: Record<string, unknown> };
  okStatus?: 200 | 302;
  /** Statuses besides 200; 401, 429 and 500 are added to every API operation, 413 to those with a body. */
  errors: number[];
  idempotent?: true;
}

const sendExample = {
  account_id: 'acc_01JD8Z6Q3W4E5R6T7Y8V9K0P1A',
  to: [{ identifier: 'ann@example.com', display_name: 'Ann' }],
  subject: 'Lunch on Friday?',
  body: '<p>Are you free on Friday?</p>',
  tracking_options: { opens: true, clicks: true, label: 'lunch' },
};

export const OPERATIONS: Operation[] = [
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
  // Folders
  {
    method: 'get',
    path: '/folders',
    operationId: 'listFolders',
    tag: 'Folders',
    summary: "List an account's folders",
    query: FolderListQuery,
    ok: Folders,
    errors: [400],
  },
  {
    method: 'get',
    path: '/{account_id}/folders/{folder_id}',
    operationId: 'getFolder',
    tag: 'Folders',
    summary: 'Get a folder',
    ok: Folder,
    errors: [404],
  },
  // Emails
  {
    method: 'get',
    path: '/emails',
    operationId: 'listEmails',
    tag: 'Emails',
    summary: 'List and search emails',
    description:
      'Newest first by date. Every filter combines with the others; without `account_id`, every account. Drafts are included (role `DRAFTS`) unless a filter excludes them.',
    query: EmailListQuery,
    ok: Emails,
    errors: [400],
  },
  {
    method: 'post',
    path: '/emails',
    operationId: 'sendEmail',
    tag: 'Emails',
    summary: 'Send an email',
    description:
      "Sent from the account's address through its SMTP server; the copy lands in Sent and `email.new` follows with `origin: api`. At least one recipient unless `reply_to` is set (then recipients, `Re:` subject and threading headers are filled in). With `draft_id`, the saved draft is sent (its recipients, subject, bodies and attachments, each overridable by the request's fields) and removed from Drafts; `email.draft.delete` follows. Up to 30 MB.",
    body: { schema: ComposeBody, name: 'SendEmailRequest', multipart: true, example: sendExample },
    ok: EmailSent,
    errors: [400, 404, 409, 422, 502],
    idempotent: true,
  },
  {
    method: 'get',
    path: '/emails/{email_id}',
    operationId: 'getEmail',
    tag: 'Emails',
    summary: 'Get an email',
    ok: Email,
    errors: [404],
  },
  {
    method: 'put',
    path: '/emails/{email_id}',
    operationId: 'modifyEmail',
    tag: 'Emails',
    summary: 'Mark read or unread, star, or move an email',
    description:
      'Carried out in the mailbox, then answered with the updated email; `email.update` follows. `folders` is the complete new folder set (a move replaces it; Gmail labels are added and removed).',
    body: { schema: ModifyBody, name: 'ModifyEmailRequest', example: { unread: false, folders: ['Archive'] } },
    ok: Email,
    errors: [400, 404, 502],
  },
  {
    method: 'delete',
    path: '/emails/{email_id}',
    operationId: 'trashEmail',
    tag: 'Emails',
    summary: 'Move an email to Trash',
    description: 'It stays with role `TRASH` until the provider empties the trash; then `email.delete` follows.',
    ok: EmailDeleted,
    errors: [404, 502],
  },
  {
    method: 'get',
    path: '/emails/{email_id}/raw',
    operationId: 'getEmailRaw',
    tag: 'Emails',
    summary: 'Download the RFC 822 source',
    ok: { mediaType: 'message/rfc822', description: 'The whole message as received.' },
    errors: [404],
  },
  {
    method: 'get',
    path: '/emails/{email_id}/attachments/{attachment_id}',
    operationId: 'getAttachment',
    tag: 'Emails',
    summary: 'Download an attachment',
    ok: {
      mediaType: 'application/octet-stream',
      description: "The attachment's bytes, with its own Content-Type and a Content-Disposition filename.",
    },
    errors: [404],
  },
  {
    method: 'get',
    path: '/{account_id}/emails/{email_id}',
    operationId: 'getAccountEmail',
    tag: 'Emails',
    summary: 'Get an email of an account',
    ok: Email,
    errors: [404],
  },
  {
    method: 'get',
    path: '/{account_id}/emails/{email_id}/thread',
    operationId: 'getThread',
    tag: 'Emails',
    summary: "Get an email's conversation",
    description: 'Oldest first; Sent copies included, drafts left out.',
    query: ThreadQuery,
    ok: Thread,
    errors: [400, 404],
  },
  {
    method: 'post',
    path: '/{account_id}/emails/{email_id}/unread',
    operationId: 'markUnread',
    tag: 'Emails',
    summary: 'Mark an email unread',
    ok: Email,
    errors: [404, 502],
  },
  {
    method: 'post',
    path: '/{account_id}/emails/{email_id}/read',
    operationId: 'markRead',
    tag: 'Emails',
    summary: 'Mark an email read',
    ok: Email,
    errors: [404, 502],
  },
  // Drafts
  {
    method: 'post',
    path: '/drafts',
    operationId: 'createDraft',
    tag: 'Drafts',
    summary: 'Save a draft',
    description:
      "Saved in the account's Drafts folder; `email.draft.new` follows when it syncs. The same fields as sending; recipients are optional.",
    body: {
      schema: ComposeBody,
      name: 'CreateDraftRequest',
      multipart: true,
      example: { ...sendExample, tracking_options: undefined },
    },
    ok: DraftCreated,
    errors: [400, 404, 409, 422, 502],
    idempotent: true,
  },
  {
    method: 'get',
    path: '/drafts',
    operationId: 'listDrafts',
    tag: 'Drafts',
    summary: 'List drafts',
    query: DraftListQuery,
    ok: Drafts,
    errors: [400],
  },
  // Contacts
  {
    method: 'get',
    path: '/contacts',
    operationId: 'listContacts',
    tag: 'Contacts',
    summary: 'List the people the accounts email with',
    description:
      "From, to, cc and bcc of synced mail, most recent first; the account's own address is left out. Without `account_id`, every account (a person appears once per account).",
    query: ContactListQuery,
    ok: Contacts,
    errors: [400],
  },
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
