// A scheduled send made with an Idempotency-Key: whatever becomes of the request after the account's
// object took the schedule, a retry with the key is answered from that schedule and never schedules
// (so never sends) the message a second time.
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { api } from './helpers.ts';
import { createSyncedAccount } from './sync-helpers.ts';

const scheduledCount = async (accountId: string) =>
  (await env.DB.prepare('SELECT COUNT(*) AS n FROM scheduled_emails WHERE account_id = ?')
    .bind(accountId)
    .first<{ n: number }>())!.n;

describe('POST /emails with send_at and an Idempotency-Key', () => {
  it('answers a retry from the schedule when the first request never completed its key', async () => {
    const { id } = await createSyncedAccount();
    const body = {
      account_id: id,
      to: [{ identifier: 'bob@example.test' }],
      subject: 'later',
      body: '<p>later</p>',
      send_at: new Date(Date.now() + 3_600_000).toISOString(),
    };
    const headers = { 'Idempotency-Key': 'scheduled-once' };
    const first = await api('POST', '/emails', { body, headers });
    expect(first.status).toBe(202);
    expect(first.body).toMatchObject({ object: 'EmailScheduled', status: 'scheduled' });

    // As if the request had died after the object took the schedule, before its key was completed,
    // and long enough ago for an abandoned claim to be taken over.
    await env.DB.prepare(
      "UPDATE idempotency_keys SET status = 'in_progress', response_code = NULL, response_json = NULL, created_at = ? WHERE key = ?",
    )
      .bind(Date.now() - 3_600_000, 'scheduled-once')
      .run();

    const retry = await api('POST', '/emails', { body, headers });
    expect(retry.status).toBe(202);
    expect(retry.body).toEqual(first.body);
    expect(await scheduledCount(id)).toBe(1);
    const again = await api('POST', '/emails', { body, headers });
    expect(again.body).toEqual(first.body);
    expect(again.headers.get('Idempotent-Replayed')).toBe('true');
    expect(await scheduledCount(id)).toBe(1);
  });
});
