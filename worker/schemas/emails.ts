/** The Email object in its two variants, and the results of sending, saving and trashing (spec: Email). */
import { z } from 'zod';
import { cursorListOf, idOf, Timestamp } from './common.ts';
import { RoleSchema } from './folders.ts';

const address = z.string().meta({ example: 'ann@example.com' });

export const Attendee = z
  .strictObject({ identifier: address, display_name: z.string() })
  .meta({ id: 'Attendee', description: 'A sender or recipient (list variant).' });

export const TypedAttendee = z
  .strictObject({ identifier: address, display_name: z.string(), identifier_type: z.literal('EMAIL_ADDRESS') })
  .meta({ id: 'TypedAttendee', description: 'A sender or recipient (single-email and thread variant).' });

export const Attachment = z
  .strictObject({
    id: idOf('attachment'),
    name: z.string(),
    extension: z.string().meta({ description: 'Lower case without the dot (`pdf`); empty if none.' }),
    size: z.int().meta({ description: 'Decoded size in bytes.' }),
    mime: z.string(),
    cid: z.string().meta({ description: 'Content-ID of an inline part; empty if none.' }),
    inline: z.boolean(),
  })
  .meta({ id: 'Attachment' });

export const Header = z.strictObject({ name: z.string(), value: z.string() }).meta({ id: 'Header' });

/** Fields both variants share. */
const common = {
  id: idOf('email'),
  account_id: idOf('account'),
  thread_id: z.string().meta({ description: 'The conversation (`thr_…`).' }),
  date: Timestamp.meta({ description: 'The Date header; the arrival time when it is missing or unreadable.' }),
  subject: z.string(),
  body: z.string().meta({ description: 'HTML body.' }),
  body_plain: z.string(),
  has_attachments: z.boolean().meta({ description: 'Inline images count.' }),
  attachments: z.array(Attachment),
  folders: z.array(idOf('folder')),
  origin: z.enum(['api', 'external']).meta({ description: '`api` when sent or saved through this API.' }),
  tracking_id: idOf('tracking').nullable(),
};

export const EmailListItem = z
  .strictObject({
    object: z.enum(['Email', 'Draft']).meta({ description: '`Draft` for drafts.' }),
    ...common,
    from_attendee: Attendee,
    to_attendees: z.array(Attendee),
    cc_attendees: z.array(Attendee),
    bcc_attendees: z.array(Attendee),
    reply_to_attendees: z.array(Attendee),
    draft_id: idOf('draft').nullable().optional().meta({ description: 'Drafts only.' }),
    provider_id: z
      .string()
      .nullable()
      .meta({ description: "The provider's own id (Gmail's X-GM-MSGID); null when the provider has none (IMAP)." }),
    message_id: z.string().meta({ description: 'The Message-ID header, with its angle brackets.' }),
    snippet: z.string(),
    in_reply_to: z
      .strictObject({ message_id: z.string(), id: idOf('email').nullable() })
      .nullable()
      .meta({ description: 'The message answered: its Message-ID, and its email id when it is in the same account.' }),
    references: z.array(z.string()),
    folder_ids: z.array(idOf('folder')),
    role: RoleSchema.meta({ description: "The email's main role." }),
    unread: z.boolean(),
    starred: z.boolean(),
    size: z.int(),
    headers: z.array(Header).optional().meta({ description: 'With `include_headers=true` only.' }),
  })
  .meta({ id: 'EmailListItem', description: 'An email as lists and email events show it.' });
export type EmailListItem = z.output<typeof EmailListItem>;

export const Email = z
  .strictObject({
    object: z.literal('Email'),
    ...common,
    from_attendee: TypedAttendee,
    to_attendees: z.array(TypedAttendee),
    cc_attendees: z.array(TypedAttendee),
    bcc_attendees: z.array(TypedAttendee),
    reply_to_attendees: z.array(TypedAttendee),
    draft_id: idOf('draft').nullable().optional().meta({ description: 'Drafts only.' }),
    headers: z.array(Header).meta({ description: 'Every header, Message-ID, In-Reply-To and References included.' }),
    is_unread: z.boolean(),
    is_complete: z.literal(true).meta({ description: 'Always true: large emails are stored whole.' }),
  })
  .meta({ id: 'Email', description: 'One email (single-email and thread variant).' });
export type Email = z.output<typeof Email>;

export const Emails = cursorListOf('Emails', EmailListItem);
export const Drafts = cursorListOf('Drafts', EmailListItem);

export const Thread = z
  .strictObject({
    object: z.literal('Thread'),
    id: z.string(),
    data: z.array(Email),
    has_more: z.boolean().meta({ description: 'Longer threads page with `GET /emails?thread_id=`.' }),
  })
  .meta({ id: 'Thread' });

export const EmailSent = z
  .strictObject({
    object: z.literal('EmailSent'),
    account_id: idOf('account'),
    message_id: z.string().meta({ description: 'The Message-ID of the sent email; its Sent copy has the same.' }),
    provider_id: z.string().nullable().meta({ description: 'Always null: SMTP returns no id.' }),
    tracking_id: idOf('tracking').nullable(),
  })
  .meta({ id: 'EmailSent' });

export const DraftCreated = z
  .strictObject({
    object: z.literal('DraftCreated'),
    account_id: idOf('account'),
    draft_id: idOf('draft'),
    message_id: z.string(),
    tracking_id: z.null(),
  })
  .meta({ id: 'DraftCreated' });

export const EmailDeleted = z
  .strictObject({ object: z.literal('EmailDeleted'), id: idOf('email') })
  .meta({ id: 'EmailDeleted' });
