/** The Account object, API keys and contacts (DECISIONS.md: Account object; spec: API key, Contact). */
import { z } from 'zod';
import { cursorListOf, idOf, offsetListOf, Timestamp } from './common.ts';

export const ACCOUNT_STATUSES = ['running', 'errored', 'disconnected'] as const;
export const INITIAL_SYNC_STATES = ['none', 'running', 'completed', 'failed'] as const;

export const Account = z
  .strictObject({
    object: z.literal('Account'),
    id: idOf('account'),
    provider: z.literal('imap'),
    email: z.string(),
    display_name: z.string().nullable().meta({ description: 'Default sender name.' }),
    user_id: z.string().meta({ description: 'The IMAP login user.' }),
    status: z.enum(ACCOUNT_STATUSES),
    is_locked: z.boolean(),
    initial_sync: z.enum(INITIAL_SYNC_STATES),
    initial_sync_enable: z.boolean(),
    initial_sync_days: z.int().min(1).max(30).nullable(),
    metadata: z.record(z.string(), z.unknown()).meta({ description: 'Free-form JSON set by the client.' }),
    state: z.string().nullable().meta({ description: 'Echo of the auth intent `state`.' }),
    created_at: Timestamp,
    connected_at: Timestamp.nullable(),
    last_error: z.string().nullable(),
  })
  .meta({ id: 'Account' });
export type Account = z.output<typeof Account>;

export const Accounts = offsetListOf('Accounts', Account);

export const AccountDeleted = z
  .strictObject({ object: z.literal('AccountDeleted'), id: idOf('account') })
  .meta({ id: 'AccountDeleted' });

const apiKeyFields = {
  object: z.literal('ApiKey'),
  id: idOf('apiKey'),
  name: z.string().max(100),
  prefix: z.string().meta({ description: 'The leading characters of the key, to recognise it.' }),
  role: z.literal('service').meta({ description: 'Full access (there are no scopes).' }),
  issued_at: Timestamp,
  last_used_at: Timestamp.nullable().meta({ description: 'Updated at most once a minute.' }),
};

export const ApiKey = z.strictObject(apiKeyFields).meta({ id: 'ApiKey' });
export type ApiKey = z.output<typeof ApiKey>;

export const ApiKeyCreated = z
  .strictObject({
    ...apiKeyFields,
    key: z.string().meta({ description: 'The key itself: shown in this answer only.' }),
  })
  .meta({ id: 'ApiKeyCreated' });

export const ApiKeys = offsetListOf('ApiKeys', ApiKey);

export const ApiKeyDeleted = z
  .strictObject({ object: z.literal('ApiKeyDeleted'), id: idOf('apiKey') })
  .meta({ id: 'ApiKeyDeleted' });

export const Contact = z
  .strictObject({
    object: z.literal('Contact'),
    account_id: idOf('account'),
    identifier: z.string().meta({ description: 'The email address, lower case.' }),
    display_name: z.string(),
    emails_count: z.int(),
    last_email_at: Timestamp,
  })
  .meta({ id: 'Contact' });
export type Contact = z.output<typeof Contact>;

export const Contacts = cursorListOf('Contacts', Contact);
