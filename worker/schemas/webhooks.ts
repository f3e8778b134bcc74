/** Webhook endpoints and their delivery log (spec: Webhook endpoint, Webhook conversation). */
import { z } from 'zod';
import { idOf, offsetListOf, Timestamp } from './common.ts';
import { Event, EventTypeSchema } from './events.ts';

export const WebhookEndpoint = z
  .strictObject({
    object: z.literal('WebhookEndpoint'),
    id: idOf('endpoint'),
    url: z.string(),
    description: z.string(),
    trigger_events: z.array(EventTypeSchema),
    account_ids: z.array(z.string()).meta({ description: 'Only these accounts’ events; empty: every account.' }),
    headers: z.array(z.strictObject({ key: z.string(), value: z.string() })),
    secret: z
      .string()
      .meta({ description: '`whsec_…`: signs the calls (X-Email-Engine-Signature, webhook-signature).' }),
    enabled: z.boolean(),
    created_at: Timestamp,
  })
  .meta({ id: 'WebhookEndpoint' });
export type WebhookEndpoint = z.output<typeof WebhookEndpoint>;

export const WebhookEndpoints = offsetListOf('WebhookEndpoints', WebhookEndpoint);

export const CONVERSATION_STATUSES = ['pending', 'retrying', 'delivered', 'failed', 'dropped'] as const;

export const WebhookConversation = z
  .strictObject({
    object: z.literal('WebhookConversation'),
    id: idOf('conversation'),
    endpoint_id: idOf('endpoint'),
    event_id: idOf('event'),
    event: EventTypeSchema,
    status: z.enum(CONVERSATION_STATUSES),
    attempts: z.int(),
    last_status_code: z.int().nullable(),
    last_error: z.string().nullable(),
    payload: Event,
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'WebhookConversation' });

export const WebhookConversations = offsetListOf('WebhookConversations', WebhookConversation);
