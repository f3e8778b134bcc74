// Compile-time checks of the typed client: `npm run typecheck` fails if any of the marked calls
// below stops being a type error (so a call that does not match the API cannot compile).
import { createMailboxClient } from '../../client/index.ts';

export async function typeChecks(): Promise<void> {
  const client = createMailboxClient({ baseUrl: 'http://127.0.0.1:8787', apiKey: 'mbx_…' });
  // @ts-expect-error: no such path
  await client.GET('/api/v1/mails');
  // @ts-expect-error: role is one of the Role values
  await client.GET('/api/v1/emails', { params: { query: { role: 'OUTBOX' } } });
  // @ts-expect-error: sending needs account_id
  await client.POST('/api/v1/emails', { body: { to: [{ identifier: 'ann@example.com' }] } });
  // @ts-expect-error: subject is a string
  await client.POST('/api/v1/emails', { body: { account_id: 'acc_1', subject: 42 } });
  // @ts-expect-error: the path parameter is required
  await client.GET('/api/v1/emails/{email_id}', {});
  const { data } = await client.GET('/api/v1/emails/{email_id}', { params: { path: { email_id: 'email_1' } } });
  // @ts-expect-error: the single-email variant has is_unread, not unread
  void data?.unread;
  void data?.is_unread;
}
