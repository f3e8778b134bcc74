// End to end: scheduled sends (POST /emails with send_at). Nothing goes out before its time, then
// exactly one message; a cancel before the time means it never goes; a send survives its gateway
// SIGKILLed and the Worker restarted in between (Durable Object alarms, not timers); one due while
// no gateway runs goes out once a gateway is back; bad send_at values store nothing.
import type { ImapFlow } from 'imapflow';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { uidsWithSubject, openImap } from '../mailserver/client.ts';
import { startMailServer, type MailServer } from '../mailserver/mailserver.ts';
import { connectMailbox } from './connect.ts';
import { dumpLogsOnFailure, eventually, startService, type GatewayProcess, type Service } from './service.ts';

const GATEWAY = 'gw-scheduled';

let mail: MailServer;
let service: Service;
let gateway: GatewayProcess | null;
let alice: { id: string; email: string };
let bobImap: ImapFlow;

/** How many messages with this subject bob's INBOX holds. */
const inBob = async (subject: string) => (await uidsWithSubject(bobImap, 'INBOX', subject)).length;

const startGateway = () => service.startGateway(GATEWAY, { NODE_EXTRA_CA_CERTS: mail.caFile });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const inSeconds = (s: number) => new Date(Date.now() + s * 1000).toISOString();

async function schedule(subject: string, sendAt: string, key?: string) {
  const res = await service.fetch(`${service.base}/api/v1/emails`, {
    method: 'POST',
    headers: {
      'X-API-KEY': service.adminKey,
      'Content-Type': 'application/json',
      ...(key ? { 'Idempotency-Key': key } : {}),
    },
    body: JSON.stringify({
      account_id: alice.id,
      to: [{ identifier: 'bob@example.test' }],
      subject,
      body: `<p>${subject}</p>`,
      send_at: sendAt,
    }),
  });
  return { status: res.status, body: (await res.json()) as any };
}

const scheduled = async (id: string) => (await service.api('GET', `/emails/scheduled/${id}`)).body;

/** Waits until bob has the message, then checks it is exactly one once its status is final. */
async function deliveredOnce(subject: string, id: string) {
  await eventually(async () => ((await inBob(subject)) >= 1 ? true : null), {
    what: `${subject} in bob INBOX`,
    timeoutMs: 90_000,
  });
  await eventually(async () => ((await scheduled(id)).status === 'sent' ? true : null), {
    what: `${id} sent`,
    timeoutMs: 30_000,
  });
  expect(await inBob(subject)).toBe(1);
}

beforeAll(async () => {
  mail = await startMailServer();
  service = await startService();
  gateway = startGateway();
  alice = await connectMailbox(service, mail, 'alice');
  bobImap = await openImap(mail, 'bob');
}, 180_000);

afterAll(async () => {
  await bobImap?.logout().catch(() => undefined);
  await service?.stop();
  await mail?.stop();
});

afterEach((ctx) => dumpLogsOnFailure(ctx, service));

describe('scheduled send', () => {
  it('refuses send_at in the past, 3 s ahead, 31 days ahead or not a timestamp, storing nothing', async () => {
    // Over every database: a refused request stores nothing in any shard.
    const count = (table: string) =>
      service.queryEach<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`).reduce((n, d) => n + d.rows[0]!.n, 0);
    const before = count('scheduled_emails');
    const outgoing = count('outgoing_messages');
    for (const sendAt of [inSeconds(-60), inSeconds(3), inSeconds(31 * 86_400), 'tomorrow morning']) {
      const res = await schedule(`bad-${Date.now()}`, sendAt);
      expect(res.status, sendAt).toBe(400);
      expect(res.body.detail).toMatch(/^send_at: /);
    }
    expect(count('scheduled_emails')).toBe(before);
    expect(count('outgoing_messages')).toBe(outgoing);
    expect((await service.api('GET', '/emails/scheduled?status=waiting')).status).toBe(400);
    expect((await service.api('GET', '/emails/scheduled/sch_nope')).status).toBe(404);
    expect((await service.api('GET', '/emails/scheduled/email_01JD8Z6Q3W4E5R6T7Y8V9K0P1A')).status).toBe(404);
  });

  it('sends at its time exactly once (Sent copy origin api); a send cancelled after 3 s never goes', {
    timeout: 120_000,
  }, async () => {
    const subject = `scheduled-${Date.now()}`;
    const cancelSubject = `cancelled-${Date.now()}`;
    const sendAt = inSeconds(15);
    const first = await schedule(subject, sendAt, `key-${subject}`);
    expect(first.status).toBe(202);
    expect(first.body).toMatchObject({ object: 'EmailScheduled', account_id: alice.id, status: 'scheduled' });
    expect(first.body.id).toMatch(/^sch_/);
    // The same key replays the answer and schedules nothing more.
    const replay = await schedule(subject, sendAt, `key-${subject}`);
    expect(replay).toEqual({ status: 202, body: first.body });
    const other = await schedule(cancelSubject, inSeconds(15));
    expect(other.status).toBe(202);
    const cancelTime = Date.parse(other.body.send_at);

    await sleep(3_000);
    const cancel = await service.api('DELETE', `/emails/scheduled/${other.body.id}`);
    expect(cancel).toEqual({ status: 200, body: { object: 'ScheduledEmailCancelled', id: other.body.id } });
    const again = await service.api('DELETE', `/emails/scheduled/${other.body.id}`);
    expect(again.status).toBe(409);
    expect(again.body.detail).toMatch(/cancelled/);

    const listed = await service.api('GET', `/emails/scheduled?account_id=${alice.id}&status=scheduled`);
    expect(listed.body.data.map((s: { id: string }) => s.id)).toEqual([first.body.id]);
    expect(listed.body.data[0]).toMatchObject({ subject, to: [{ identifier: 'bob@example.test' }], error: null });

    await sleep(Math.max(0, Date.parse(sendAt) - 5_000 - Date.now()));
    expect(await inBob(subject)).toBe(0);
    await deliveredOnce(subject, first.body.id);
    const sentCopy = await eventually(
      async () => {
        const res = await service.api('GET', `/emails?account_id=${alice.id}&folder=SENT&limit=50`);
        return (res.body.data as { message_id: string; origin: string }[]).find(
          (e) => e.message_id === first.body.message_id,
        );
      },
      { what: 'the Sent copy', timeoutMs: 60_000 },
    );
    expect(sentCopy.origin).toBe('api');
    const late = await service.api('DELETE', `/emails/scheduled/${first.body.id}`);
    expect(late.status).toBe(409);
    expect(late.body.detail).toMatch(/sent/);

    await sleep(Math.max(0, cancelTime + 30_000 - Date.now()));
    expect(await inBob(cancelSubject)).toBe(0);
    expect(await scheduled(other.body.id)).toMatchObject({ status: 'cancelled', subject: cancelSubject });
  });

  it('survives its gateway SIGKILLed and the Worker restarted; one due while no gateway runs goes when one is back', {
    timeout: 240_000,
  }, async () => {
    const subject = `survives-${Date.now()}`;
    const waiting = `waiting-${Date.now()}`;
    const first = await schedule(subject, inSeconds(45));
    expect(first.status).toBe(202);
    await gateway!.kill('SIGKILL');
    gateway = null;
    await service.restartWorker();
    // Due in 6 s, with no gateway at all: it waits (still scheduled, nothing sent).
    const second = await schedule(waiting, inSeconds(6));
    expect(second.status).toBe(202);
    await sleep(Math.max(0, Date.parse(second.body.send_at) + 8_000 - Date.now()));
    expect(await scheduled(second.body.id)).toMatchObject({ status: 'scheduled', error: null });
    expect(await inBob(waiting)).toBe(0);

    gateway = startGateway();
    await deliveredOnce(waiting, second.body.id);
    await deliveredOnce(subject, first.body.id);
  });

  it('is cancelled when its account is removed, and erased with it', { timeout: 120_000 }, async () => {
    const res = await schedule(`removed-${Date.now()}`, inSeconds(3_600));
    expect(res.status).toBe(202);
    expect((await service.api('DELETE', `/accounts/${alice.id}`)).status).toBe(200);
    expect((await service.api('GET', `/emails/scheduled/${res.body.id}`)).status).toBe(404);
    // Every database: the account's row (and with it its shard) may be purged already.
    const row = () =>
      service
        .queryEach<{ status: string }>('SELECT status FROM scheduled_emails WHERE id = ?', res.body.id)
        .flatMap((d) => d.rows);
    // Cancelled by the removal (unless the purge already took it), then deleted by the account's purge.
    for (const r of row()) expect(r.status).toBe('cancelled');
    await eventually(() => (row().length === 0 ? true : null), { what: 'the purge', timeoutMs: 90_000 });
  });
});
