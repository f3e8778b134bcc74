// Scheduled sends inside workerd: a retry with the Idempotency-Key is answered from the schedule the
// account's object took, whatever became of the first request, and never schedules (so never sends)
// the message a second time; a schedule whose outcome was unknown learns it from the gateway's report.
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { api } from './helpers.ts';
import { accountDb, createSyncedAccount, gatewayCall } from './sync-helpers.ts';

const scheduledCount = async (accountId: string) =>
  (await (
    await accountDb(accountId)
  )
    .prepare('SELECT COUNT(*) AS n FROM scheduled_emails WHERE account_id = ?')
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

  it('takes the outcome of a schedule that was unknown from the gateway’s late report', async () => {
    const { id } = await createSyncedAccount();
    const body = {
      account_id: id,
      to: [{ identifier: 'bob@example.test' }],
      subject: 'later, unknown',
      body: '<p>later</p>',
      send_at: new Date(Date.now() + 3_600_000).toISOString(),
    };
    const scheduled = await api('POST', '/emails', { body });
    expect(scheduled.status).toBe(202);
    // As the object leaves it when the gateway stopped answering after taking the message.
    await (await accountDb(id))
      .prepare("UPDATE scheduled_emails SET status = 'failed', error = ?, ended_at_ms = ? WHERE id = ?")
      .bind('The outcome is unknown.', Date.now(), scheduled.body.id)
      .run();
    const report = await gatewayCall(`/internal/gateway/accounts/${id}/outcomes`, {
      message_id: scheduled.body.message_id,
      sent: true,
      detail: null,
    });
    expect(report.status).toBe(200);
    const after = await api('GET', `/emails/scheduled/${scheduled.body.id}`);
    expect(after.body).toMatchObject({ status: 'sent', error: null });
    // A second report changes nothing: the outcome was settled once.
    await gatewayCall(`/internal/gateway/accounts/${id}/outcomes`, {
      message_id: scheduled.body.message_id,
      sent: false,
      detail: 'late',
    });
    expect((await api('GET', `/emails/scheduled/${scheduled.body.id}`)).body).toMatchObject({ status: 'sent' });
  });
});
