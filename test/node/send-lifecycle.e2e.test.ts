// End to end: a send's life belongs to the account's object. A gateway killed after the SMTP server
// has the message (its reply held by a proxy) and restarted with the same GATEWAY_ID is never asked
// to send it again; a client that goes away mid-send, then retries after the claim-takeover window,
// gets the send's own result. Either way the recipient has exactly one message. And one account's
// queue of sends is bounded, each send's budget running from its admission.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { dumpLogsOnFailure, eventually } from './service.ts';
import { startSendRig, type SendRig } from './send-rig.ts';

/** The server's reply to the body is held this long: the gateway is killed, or the client leaves, meanwhile. */
const HOLD_MS = 8_000;
/** SEND_QUEUE_LIMIT in this test. */
const QUEUE = 10;

let rig: SendRig;

/** A message big enough for the proxy to hold its reply, to bob, with a copy to alice (its sync settles the key). */
const message = (subject: string, lines = 24_000) => ({
  account_id: rig.alice.id,
  to: [{ identifier: 'bob@example.test' }],
  cc: [{ identifier: rig.alice.email }],
  subject,
  body: `<p>${'held line of text '.repeat(lines)}</p>`,
});

/** Retries with the key until it answers other than 409; no retry may send anything. */
const settled = (body: unknown, key: string) =>
  eventually(
    async () => {
      const r = await rig.send(body, key);
      return r.status === 409 ? null : r;
    },
    { what: `the key ${key} settled`, timeoutMs: 90_000, intervalMs: 1_000 },
  );

// The project's hookTimeout (300 s): `npm start` (more so with mail shards) may take minutes on a loaded machine.
beforeAll(async () => {
  rig = await startSendRig({
    gatewayId: 'gw-lifecycle',
    workerEnv: { SEND_TIMEOUT_SECONDS: '60', IDEMPOTENCY_ABANDONED_SECONDS: '2', SEND_QUEUE_LIMIT: String(QUEUE) },
    threshold: 200_000,
    holdMs: HOLD_MS,
  });
});

afterAll(() => rig?.stop());

afterEach((ctx) => dumpLogsOnFailure(ctx, rig?.service));

describe('a send owned by the account object', () => {
  it(`queues ${QUEUE} sends against a server answering after 20 s each: each goes out once or fails clearly, the ${QUEUE + 1}th is a 429`, {
    timeout: 240_000,
  }, async () => {
    // Small messages (quick to compose), each held 20 s at the server.
    rig.proxy.holdMs = 20_000;
    rig.proxy.threshold = 8_000;
    const run = `queued-${Date.now()}`;
    const outgoingRows = (outcome = '%') =>
      rig.service.mailQuery<{ n: number }>(
        rig.alice.id,
        'SELECT COUNT(*) AS n FROM outgoing_messages WHERE account_id = ? AND outcome LIKE ?',
        rig.alice.id,
        outcome,
      )[0]!.n;
    const [before, pendingBefore] = [outgoingRows(), outgoingRows('pending')];
    const bodies = Array.from({ length: QUEUE }, (_, k) => message(`${run}-${k}`, 1_000));
    const firsts = bodies.map((body, k) => rig.send(body, `${run}-key-${k}`));
    // Every one admitted (its outgoing record written) and none finished: the queue is full.
    await eventually(() => outgoingRows('pending') - pendingBefore >= QUEUE || null, {
      what: 'all sends admitted',
      timeoutMs: 15_000,
    });
    const extra = await fetch(`${rig.service.base}/api/v1/emails`, {
      method: 'POST',
      headers: {
        'X-API-KEY': rig.service.adminKey,
        'Content-Type': 'application/json',
        'Idempotency-Key': `${run}-extra`,
      },
      body: JSON.stringify(message(`${run}-extra`, 10)),
    });
    expect(extra.status).toBe(429);
    expect(((await extra.json()) as { type: string }).type).toBe('errors/rate_limited');
    expect(Number(extra.headers.get('Retry-After'))).toBeGreaterThan(0);
    expect(outgoingRows() - before).toBe(QUEUE); // nothing stored for it

    const answers = await Promise.all(firsts);
    const refused = answers.filter((a) => a.status === 502 && /past its time budget/.test(a.body.detail));
    const unknown = answers.filter((a) => a.status === 502 && /may still go out/.test(a.body.detail));
    expect(answers.filter((a) => a.status === 200).length).toBeGreaterThan(0);
    expect(refused.length).toBeGreaterThan(0);
    expect(answers.length).toBe(answers.filter((a) => a.status === 200).length + refused.length + unknown.length);

    // Retries of everything that may have gone out: the first result, nothing sent again.
    rig.proxy.holdMs = HOLD_MS;
    rig.proxy.threshold = 200_000;
    for (const [k, a] of answers.entries()) {
      if (refused.includes(a)) continue;
      const result = await settled(bodies[k], `${run}-key-${k}`);
      expect(result.status).toBe(200);
    }
    for (const [k, a] of answers.entries())
      expect(await rig.inBob(`${run}-${k}`), `send ${k}`).toBe(refused.includes(a) ? 0 : 1);
    expect(await rig.inBob(`${run}-extra`)).toBe(0);
  });

  it('is never sent again when its gateway dies after the server has it and restarts with the same id', {
    timeout: 180_000,
  }, async () => {
    const subject = `killed-${Date.now()}`;
    const body = message(subject);
    const heldBefore = rig.proxy.held;
    const first = rig.send(body, 'key-killed');
    await eventually(() => rig.proxy.held > heldBefore || null, { what: 'the body at the server', timeoutMs: 60_000 });
    await rig.gateway.kill('SIGKILL');
    rig.startGateway();

    const answer = await first;
    expect([200, 502]).toContain(answer.status);
    if (answer.status === 502) expect(answer.body.detail).toMatch(/may still go out: do not send it again/);
    await eventually(async () => ((await rig.inBob(subject)) === 1 ? true : null), {
      what: 'the message in bob INBOX',
      timeoutMs: 60_000,
    });
    // Retries never send: they wait (409), then get the result once alice's copy has synced.
    const result = await settled(body, 'key-killed');
    expect(result.status).toBe(200);
    expect(result.body).toMatchObject({ object: 'EmailSent', account_id: rig.alice.id });
    expect(await rig.inBob(subject)).toBe(1);
  });

  it('is sent once when the client goes away mid-send and retries after the takeover window', {
    timeout: 180_000,
  }, async () => {
    const subject = `aborted-${Date.now()}`;
    const body = message(subject);
    const heldBefore = rig.proxy.held;
    const abort = new AbortController();
    const first = rig.send(body, 'key-aborted', abort.signal).catch((err: unknown) => err);
    await eventually(() => rig.proxy.held > heldBefore || null, { what: 'the body at the server', timeoutMs: 60_000 });
    abort.abort();
    expect(await first).toBeInstanceOf(Error);
    // Past IDEMPOTENCY_ABANDONED_SECONDS (2 s) the claim is not taken over: its message is on its way.
    await new Promise((r) => setTimeout(r, 3_000));
    const result = await settled(body, 'key-aborted');
    expect(result.status).toBe(200);
    expect(result.body).toMatchObject({ object: 'EmailSent', account_id: rig.alice.id });
    await eventually(async () => ((await rig.inBob(subject)) === 1 ? true : null), {
      what: 'the message in bob INBOX',
      timeoutMs: 60_000,
    });
    expect(await rig.inBob(subject)).toBe(1);
  });
});
