/** The `webhooks` section of the document: one call per event type, with its payload and headers. */
import { EVENT_TYPES, type EventType } from '../events/types.ts';
import { eventSchemaName } from '../schemas/events.ts';

/** When each event is emitted (the spec's table, made precise where DECISIONS.md does). */
export const EVENT_DOCS: Record<EventType, string> = {
  'email.new': 'An email arrived or was synced; after a send through the API with `origin: api`.',
  'email.new.bounce': 'A report that a message could not be delivered (and will not be) arrived.',
  'email.update': 'An email was read, unread, starred, moved, labelled or trashed.',
  'email.delete': 'An email disappeared from the mailbox (for example the trash was emptied).',
  'email.draft.new': 'A draft synced (also one saved through the API).',
  'email.draft.delete': 'A draft was removed (also after it was sent with `draft_id`).',
  'email.folder.create': 'A folder appeared.',
  'email.folder.update': 'A folder was renamed, moved or changed role.',
  'email.folder.delete': 'A folder was deleted.',
  'tracking.open': 'An email sent with `tracking_options.opens` was opened.',
  'tracking.click': 'A link in an email sent with `tracking_options.clicks` was clicked.',
  'account.add': 'An account was connected.',
  'account.reconnect': 'An account was reconnected with new credentials.',
  'account.remove': 'An account was removed.',
  'account.status.running': 'The account syncs again.',
  'account.status.errored': 'The provider refused the account (for example the password changed).',
  'account.status.disconnected': 'The service lost the connection to the provider.',
  'account.initial_sync.running': 'The initial sync started.',
  'account.initial_sync.completed': 'The initial sync finished.',
  'account.initial_sync.failed': 'The initial sync failed.',
};

const header = (name: string, description: string) => ({
  name,
  in: 'header',
  required: true,
  description,
  schema: { type: 'string' },
});

export function webhookOperations(): Record<string, unknown> {
  return Object.fromEntries(
    EVENT_TYPES.map((type) => [
      type,
      {
        post: {
          summary: type,
          description: `${EVENT_DOCS[type]} Delivered at least once to enabled endpoints whose \`trigger_events\` include it (and whose \`account_ids\`, when set, include the account); subscribers deduplicate on the event id.`,
          operationId: `event_${type.replace(/\./g, '_')}`,
          parameters: [
            header('X-Email-Engine-Signature', '`t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`.'),
            header('webhook-id', 'The event id (Standard Webhooks).'),
            header('webhook-timestamp', 'Unix seconds (Standard Webhooks).'),
            header('webhook-signature', '`v1,<base64>` keyed with the secret after `whsec_` (Standard Webhooks).'),
          ],
          requestBody: {
            required: true,
            content: { 'application/json': { schema: { $ref: `#/components/schemas/${eventSchemaName(type)}` } } },
          },
          responses: {
            '200': {
              description:
                'Any 2xx within 15 s is a delivery. Anything else is retried at about 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h and 24 h.',
            },
          },
        },
      },
    ]),
  );
}
