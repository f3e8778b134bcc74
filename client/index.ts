/**
 * The typed client of the mailbox-edge API: openapi-fetch over the types openapi-typescript
 * generated from the OpenAPI document (client/schema.d.ts). Paths, parameters, bodies and answers
 * are all checked by TypeScript; see client/README.md.
 */
import createClient, { type Client, type ClientOptions } from 'openapi-fetch';
import type { components, paths } from './schema.d.ts';

export type { components, paths };
export type Schemas = components['schemas'];
export type MailboxClient = Client<paths>;

export interface MailboxClientOptions extends Omit<ClientOptions, 'baseUrl'> {
  /** The service's origin, e.g. `https://mail.example.com` (paths start with `/api/v1`). */
  baseUrl: string;
  /** Sent as X-API-KEY with every request. */
  apiKey: string;
}

export function createMailboxClient({ baseUrl, apiKey, headers, ...options }: MailboxClientOptions): MailboxClient {
  return createClient<paths>({
    ...options,
    baseUrl,
    headers: { ...(headers as Record<string, string> | undefined), 'X-API-KEY': apiKey },
  });
}
