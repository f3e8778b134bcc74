// End to end: a send whose outcome the Worker does not learn in time is never sent twice. The
// account's SMTP goes through a proxy that holds the server's replies once the message body has
// gone through, so the gateway finishes the SMTP transaction after the Worker stopped waiting
// (SEND_TIMEOUT_SECONDS=3). The client then retries with the same Idempotency-Key.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { dumpLogsOnFailure, eventually } from './service.ts';
import { startSendRig, type SendRig } from './send-rig.ts';

let rig: SendRig;

// The project's hookTimeout (300 s): `npm start` (more so with mail shards) may take minutes on a loaded machine.
beforeAll(async () => {
  rig = await startSendRig({
    gatewayId: 'gw-outcome',
    workerEnv: { SEND_TIMEOUT_SECONDS: '3' },
    // The body of the test message is ~400 KB; logins and envelopes are far below the threshold.
    threshold: 200_000,
    holdMs: 9_000,
  });
});

afterAll(() => rig?.stop());

afterEach((ctx) => dumpLogsOnFailure(ctx, rig?.service));

describe('a send whose outcome is unknown', () => {
  it('is sent once: the retry with the same key waits, then gets the first result; the Sent copy is origin api', async () => {
    const subject = `outcome-${Date.now()}`;
    const body = {
      account_id: rig.alice.id,
      to: [{ identifier: 'bob@example.test' }],
      subject,
      body: `<p>${'slow line of text '.repeat(24_000)}</p>`,
    };
    const first = await rig.send(body, 'key-slow-1');
    expect(first.status).toBe(502);
    expect(first.body.type).toBe('errors/provider_error');
    expect(first.body.detail).toMatch(/may still go out: do not send it again/);
    expect(rig.proxy.held).toBe(1);

    // While the gateway is still in the SMTP transaction: nothing is sent again.
    const early = await rig.send(body, 'key-slow-1');
    expect(early.status).toBe(409);
    expect(early.body.type).toBe('errors/already_exists');

    // The gateway finishes; bob gets the message once and the key answers with the first result.
    await eventually(async () => ((await rig.inBob(subject)) === 1 ? true : null), {
      what: 'the message in bob INBOX',
      timeoutMs: 60_000,
    });
    const settled = await eventually(
      async () => {
        const r = await rig.send(body, 'key-slow-1');
        return r.status === 200 ? r : null;
      },
      { what: 'the retry answering with the first result', timeoutMs: 60_000, intervalMs: 500 },
    );
    expect(settled.replayed).toBe('true');
    expect(settled.body).toMatchObject({ object: 'EmailSent', account_id: rig.alice.id });
    const messageId: string = settled.body.message_id;
    expect(messageId).toMatch(/^<.+@.+>$/);

    // The copy in Sent is recognised as this API's send.
    const sentCopy = await eventually(
      async () => {
        const res = await rig.service.api('GET', `/emails?account_id=${rig.alice.id}&folder=SENT&limit=50`);
        return (res.body as { data: { message_id: string; origin: string }[] }).data.find(
          (e) => e.message_id === messageId,
        );
      },
      { what: 'the Sent copy', timeoutMs: 60_000 },
    );
    expect(sentCopy.origin).toBe('api');

    // Another repeat, and a little time: still one message at bob, and one SMTP transaction held.
    expect((await rig.send(body, 'key-slow-1')).status).toBe(200);
    await new Promise((r) => setTimeout(r, 2_000));
    expect(await rig.inBob(subject)).toBe(1);
    expect(rig.proxy.held).toBe(1);
  }, 180_000);

  it('refuses the same key with another body: 422', async () => {
    const body = {
      account_id: rig.alice.id,
      to: [{ identifier: 'bob@example.test' }],
      subject: 'small',
      body: '<p>hi</p>',
    };
    const first = await rig.send(body, 'key-reused');
    // With SEND_TIMEOUT_SECONDS=3 the send may outlast its wait (a new TLS session through the proxy):
    // 200, or 502 with an unknown outcome; either way the key is taken by this body.
    expect([200, 502]).toContain(first.status);
    const other = await rig.send({ ...body, subject: 'another subject' }, 'key-reused');
    expect(other.status).toBe(422);
    expect(other.body.type).toBe('errors/idempotency_key_reused');
    expect(other.body.detail).toMatch(/another body/);
  }, 60_000);
});
