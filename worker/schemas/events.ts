/**
 * The Event envelope and each event type's `data` (DECISIONS.md, "Webhook calls"): the payload of
 * webhook calls, of the events feed and of the conversation log.
 */
import { z } from 'zod';
import { EVENT_TYPES, type EventType } from '../events/types.ts';
import { Account } from './accounts.ts';
import { cursorListOf, idOf, Timestamp } from './common.ts';
import { EmailListItem } from './emails.ts';
import { Folder } from './folders.ts';

export const EventTypeSchema = z.enum(EVENT_TYPES).meta({ id: 'EventType' });

/** Email events carry the list variant; over 64 KB without its bodies, marked `body_truncated`. */
export const EmailEventData = z
  .strictObject({
    ...EmailListItem.shape,
    body: z.string().optional(),
    body_plain: z.string().optional(),
    body_truncated: z.literal(true).optional().meta({ description: 'Set when the bodies were left out (over 64 KB).' }),
  })
  .meta({ id: 'EmailEventData' });

export const BounceEventData = z
  .strictObject({
    email_id: idOf('email').meta({ description: 'The bounce report itself.' }),
    original_message_id: z.string().nullable().meta({ description: 'Message-ID of the message that bounced.' }),
    recipient: z.string().meta({ description: 'The address that failed.' }),
    status: z.string().meta({ description: 'Enhanced status code, e.g. `5.1.1`.' }),
    action: z.string().meta({ description: '`failed`.' }),
    diagnostic: z.string(),
  })
  .meta({ id: 'BounceEventData' });

export const TrackingEventData = z
  .strictObject({
    email_id: idOf('email').nullable().meta({ description: 'Null while the Sent copy has not synced yet.' }),
    tracking_id: idOf('tracking'),
    url: z.string().optional().meta({ description: 'The link clicked (`tracking.click` only).' }),
    user_agent: z.string(),
    ip: z.string(),
    label: z.string().nullable(),
  })
  .meta({ id: 'TrackingEventData' });

/** What `data` holds for each event type. */
const DATA: Record<EventType, z.ZodType> = {
  'email.new': EmailEventData,
  'email.new.bounce': BounceEventData,
  'email.update': EmailEventData,
  'email.delete': EmailEventData,
  'email.draft.new': EmailEventData,
  'email.draft.delete': EmailEventData,
  'email.folder.create': Folder,
  'email.folder.update': Folder,
  'email.folder.delete': Folder,
  'tracking.open': TrackingEventData,
  'tracking.click': TrackingEventData,
  'account.add': Account,
  'account.reconnect': Account,
  'account.remove': Account,
  'account.status.running': Account,
  'account.status.errored': Account,
  'account.status.disconnected': Account,
  'account.initial_sync.running': Account,
  'account.initial_sync.completed': Account,
  'account.initial_sync.failed': Account,
};

/** `email.new.bounce` → `EmailNewBounceEvent`. */
export const eventSchemaName = (type: EventType) =>
  `${type
    .split(/[._]/)
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join('')}Event`;

export const EVENT_SCHEMAS = Object.fromEntries(
  EVENT_TYPES.map((type) => [
    type,
    z
      .strictObject({
        object: z.literal('Event'),
        id: idOf('event'),
        type: z.literal(type),
        created_at: Timestamp,
        account_id: idOf('account').nullable(),
        endpoint_id: idOf('endpoint').nullable().meta({ description: 'The endpoint called; null in the events feed.' }),
        data: DATA[type],
      })
      .meta({ id: eventSchemaName(type) }),
  ]),
) as unknown as Record<EventType, z.ZodObject>;

export const Event = z
  .discriminatedUnion('type', Object.values(EVENT_SCHEMAS) as [z.ZodObject, ...z.ZodObject[]])
  .meta({ id: 'Event', description: 'The Event envelope; `data` depends on `type`.' });

export const Events = cursorListOf('Events', Event);
