/** Scheduled sends: the answer to POST /emails with `send_at`, and the ScheduledEmail object. */
import { z } from 'zod';
import { SCHEDULED_STATUSES } from '../send/scheduled.ts';
import { cursorListOf, idOf, Timestamp } from './common.ts';

export const EmailScheduled = z
  .strictObject({
    object: z.literal('EmailScheduled'),
    id: idOf('scheduled'),
    account_id: idOf('account'),
    send_at: Timestamp,
    message_id: z.string().meta({ description: 'The Message-ID the email will have; its Sent copy has the same.' }),
    status: z.literal('scheduled'),
  })
  .meta({ id: 'EmailScheduled' });

export const ScheduledEmail = z
  .strictObject({
    object: z.literal('ScheduledEmail'),
    id: idOf('scheduled'),
    account_id: idOf('account'),
    send_at: Timestamp,
    created_at: Timestamp,
    message_id: z.string(),
    subject: z.string().nullable(),
    to: z
      .array(z.strictObject({ identifier: z.string(), display_name: z.string().optional() }))
      .meta({ description: 'The recipients as the send gave them.' }),
    status: z.enum(SCHEDULED_STATUSES),
    error: z.string().nullable().meta({ description: 'Why it failed (status `failed`), else null.' }),
  })
  .meta({
    id: 'ScheduledEmail',
    description:
      '`scheduled` until its time, then `sending`, then `sent` or `failed`; `cancelled` by DELETE or when its account is removed. Kept 30 days after it ends.',
  });

export const ScheduledEmails = cursorListOf('ScheduledEmails', ScheduledEmail);

export const ScheduledEmailCancelled = z
  .strictObject({ object: z.literal('ScheduledEmailCancelled'), id: idOf('scheduled') })
  .meta({ id: 'ScheduledEmailCancelled' });
