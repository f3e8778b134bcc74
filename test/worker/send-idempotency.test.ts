// Idempotency-Key on POST /emails: a completed result replayed, a key in use or reused with another
// body refused; a send whose outcome is not known yet (the gateway had it, no answer came) settled
// by the gateway's report, the synced copy or time; and the key and record kept or freed by what the
// gateway holding the account answers.
import { runInDurableObject } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { describe, expect, it, vi } from 'vitest';
import { newId } from '../../worker/lib/ids.ts';
import { requestHash } from '../../worker/send/idempotency.ts';
import { shards } from '../../worker/shards/registry.ts';
import { openSocket } from './gateway-socket.ts';
import { expectError } from './helpers.ts';
import { send } from './send-helpers.ts';
import { accountDb, createSyncedAccount, gatewayCall, messageIn, rawMessage } from './sync-helpers.ts';

describe('Idempotency-Key', () => {
  it('replays a completed result, refuses one in progress with 409 or another body with 422, and releases the key after a failure', {
    timeout: 30_000,
  }, async () => {
    const { id } = await createSyncedAccount();
    const body = { account_id: id, to: [{ identifier: 'bob@example.test' }], subject: 'x' };
    const hash = await requestHash(body);
    const now = Date.now();
    const stored = {
      object: 'EmailSent',
      account_id: id,
      message_id: '<first@example.test>',
      provider_id: null,
      tracking_id: null,
    };
    await env.DB.prepare(
      `INSERT INTO idempotency_keys (key, scope, request_hash, status, response_code, response_json, created_at, expires_at)
       VALUES ('done-1', 'POST /emails', ?, 'completed', 200, ?, ?, ?), ('busy-1', 'POST /emails', ?, 'in_progress', NULL, NULL, ?, ?)`,
    )
      .bind(hash, JSON.stringify(stored), now, now + 86_400_000, hash, now, now + 86_400_000)
      .run();
    const replay = await send(body, { 'Idempotency-Key': 'done-1' });
    expect(replay.status).toBe(200);
    expect(replay.body).toEqual(stored);
    // The same key with another body is refused, not answered with the first result.
    const other = await send({ ...body, subject: 'y' }, { 'Idempotency-Key': 'done-1' });
    expectError(other, 422, 'idempotency_key_reused');
    expect((other.body as { detail: string }).detail).toMatch(/^Idempotency-Key: .*another body/);
    // The same key on drafts is another scope.
    expectError(await send(body, { 'Idempotency-Key': 'busy-1' }), 409, 'already_exists');
    expectError(await send(body, { 'Idempotency-Key': 'x'.repeat(256) }), 400, 'invalid_parameters');

    // No gateway: 502, and the key is free again (a retry is not a 409).
    expectError(await send(body, { 'Idempotency-Key': 'fails-1' }), 502, 'provider_error');
    expect(await env.DB.prepare("SELECT * FROM idempotency_keys WHERE key = 'fails-1'").first()).toBeNull();

    // An expired record is taken over.
    await env.DB.prepare("UPDATE idempotency_keys SET expires_at = ? WHERE key = 'done-1'")
      .bind(now - 1)
      .run();
    expectError(
      await send({ ...body, account_id: newId('account') }, { 'Idempotency-Key': 'done-1' }),
      404,
      'not_found',
    );
  });
});

describe('an unresolved send (the gateway had it, no answer came)', () => {
  async function unresolved(key: string, accountId: string, messageId: string, body: unknown, ageMs = 0) {
    const now = Date.now();
    const answer = {
      object: 'EmailSent',
      account_id: accountId,
      message_id: messageId,
      provider_id: null,
      tracking_id: null,
    };
    // The key in the directory, the record of the send in the account's shard.
    await env.DB.prepare(
      `INSERT INTO idempotency_keys (key, scope, request_hash, status, account_id, message_id, pending_json, created_at, expires_at)
       VALUES (?, 'POST /emails', ?, 'unresolved', ?, ?, ?, ?, ?)`,
    )
      .bind(key, await requestHash(body), accountId, messageId, JSON.stringify(answer), now - ageMs, now + 86_400_000)
      .run();
    await (await accountDb(accountId))
      .prepare(
        `INSERT INTO outgoing_messages (account_id, message_id, kind, created_at, outcome) VALUES (?, ?, 'send', ?, 'pending')`,
      )
      .bind(accountId, messageId, new Date().toISOString())
      .run();
    return answer;
  }
  /** The account's object took this send (it reached the object's queue). */
  const tookSend = (stub: DurableObjectStub, messageId: string) =>
    runInDurableObject(stub, (_instance, state) => {
      state.storage.sql.exec(
        "INSERT INTO send_ids (message_id, state, at_ms) VALUES (?, 'taken', ?)",
        messageId,
        Date.now(),
      );
    });
  const report = (accountId: string, outcome: unknown) =>
    gatewayCall(`/internal/gateway/accounts/${accountId}/outcomes`, outcome);

  it('frees the key of a send whose request ended before the account’s object took it, which then refuses it', {
    timeout: 30_000,
  }, async () => {
    const { id, stub } = await createSyncedAccount();
    const body = { account_id: id, to: [{ identifier: 'dan@example.test' }], subject: 'z' };
    // The object has kept the Message-IDs it takes for an hour; the claim was handed on two minutes ago.
    await runInDurableObject(stub, (_instance, state) => {
      state.storage.sql.exec("UPDATE send_ids SET at_ms = ? WHERE message_id = ''", Date.now() - 3_600_000);
    });
    await unresolved('cut-short', id, '<cut-short@example.test>', body, 2 * 60 * 1000);
    // A repeat finds that the object never took it: nothing went out, and this request is a new
    // attempt (no gateway here: 502, and the key is released again).
    const retried = await send(body, { 'Idempotency-Key': 'cut-short' });
    expectError(retried, 502, 'provider_error');
    expect(
      await (await accountDb(id))
        .prepare("SELECT * FROM outgoing_messages WHERE message_id = '<cut-short@example.test>'")
        .first(),
    ).toBeNull();
    // Should the first request's message reach the object after all, it is refused, nothing sent.
    const admission = await stub.admitSend();
    if (!admission.ok) throw new Error('no place in the queue');
    const late = await stub.sendOutgoing(
      admission.ticket,
      { op: 'send', account_id: id, mode: 'send', key: 'cut-short-blob', append_to: null },
      '<cut-short@example.test>',
    );
    expect(late).toMatchObject({ ok: false, nothing_sent: true, kind: 'already_exists' });
  });

  it('answers 409 while unknown, the first result once the gateway reports it sent, and frees the key after a reported failure', {
    timeout: 30_000,
  }, async () => {
    const { id } = await createSyncedAccount();
    const body = { account_id: id, to: [{ identifier: 'bob@example.test' }], subject: 'x' };

    const answer = await unresolved('late-ok', id, '<late-ok@example.test>', body);
    expectError(await send(body, { 'Idempotency-Key': 'late-ok' }), 409, 'already_exists');
    expect((await report(id, { message_id: '<late-ok@example.test>', sent: true, detail: null })).status).toBe(200);
    const replay = await send(body, { 'Idempotency-Key': 'late-ok' });
    expect(replay.status).toBe(200);
    expect(replay.body).toEqual(answer);

    // A reported failure: nothing went out, so the key is free and this request is a new attempt
    // (no gateway here: 502, and the key is released again).
    await unresolved('late-fail', id, '<late-fail@example.test>', body);
    await report(id, {
      message_id: '<late-fail@example.test>',
      sent: false,
      detail: 'SMTP server refused the message',
    });
    const retried = await send(body, { 'Idempotency-Key': 'late-fail' });
    expectError(retried, 502, 'provider_error');
    expect((retried.body as { detail: string }).detail).not.toMatch(/may still go out/);
    expect(await env.DB.prepare("SELECT * FROM idempotency_keys WHERE key = 'late-fail'").first()).toBeNull();
    expect(
      await (await accountDb(id))
        .prepare("SELECT * FROM outgoing_messages WHERE message_id = '<late-fail@example.test>'")
        .first(),
    ).toBeNull();
  });

  it('settles from the synced copy, and answers a still unknown outcome as unknown after 15 minutes', {
    timeout: 30_000,
  }, async () => {
    const { id, stub } = await createSyncedAccount();
    const body = { account_id: id, to: [{ identifier: 'carol@example.test' }], subject: 'y' };
    const answer = await unresolved('by-copy', id, '<by-copy@example.test>', body);
    await stub.acquireLease('gw-1');
    await stub.applyChanges('gw-1', [
      {
        type: 'messages',
        path: 'Sent',
        uidvalidity: 1,
        messages: [messageIn(1, rawMessage({ messageId: '<by-copy@example.test>', subject: 'y' }), ['\\Seen'])],
      },
    ]);
    const replay = await send(body, { 'Idempotency-Key': 'by-copy' });
    expect(replay.status).toBe(200);
    expect(replay.body).toEqual(answer);

    await unresolved('lost', id, '<lost@example.test>', body, 16 * 60 * 1000);
    await tookSend(stub, '<lost@example.test>');
    const unknown = await send(body, { 'Idempotency-Key': 'lost' });
    expectError(unknown, 502, 'provider_error');
    expect((unknown.body as { detail: string }).detail).toMatch(/could not be established/);
    // That answer is final: the next repeat replays it and sends nothing.
    const again = await send(body, { 'Idempotency-Key': 'lost' });
    expect(again.status).toBe(502);
    expect(again.body).toEqual(unknown.body);
  });
});

describe('a send handed to the gateway holding the account', () => {
  async function handedSend(gatewayId: string, key: string) {
    const { id, stub } = await createSyncedAccount();
    expect((await stub.acquireLease(gatewayId)).granted).toBe(true);
    const socket = await openSocket(gatewayId);
    const body = { account_id: id, to: [{ identifier: 'bob@example.test' }], subject: key };
    const response = send(body, { 'Idempotency-Key': key });
    await vi.waitFor(() => expect(socket.requests().some((r) => r.request.op === 'send')).toBe(true), {
      timeout: 10_000,
    });
    const request = socket.requests().find((r) => r.request.op === 'send');
    const answer = (reply: object) => socket.ws.send(JSON.stringify({ type: 'response', id: request.id, ...reply }));
    return { id, socket, body, response, answer };
  }
  const keyRow = (key: string) =>
    env.DB.prepare('SELECT status FROM idempotency_keys WHERE key = ?').bind(key).first<{ status: string }>();
  const records = async (accountId: string) =>
    (
      await (
        await accountDb(accountId)
      )
        .prepare('SELECT outcome FROM outgoing_messages WHERE account_id = ?')
        .bind(accountId)
        .all<{ outcome: string }>()
    ).results;

  it("answers the gateway's result even when recording it fails, and keeps the record and the key", {
    timeout: 30_000,
  }, async () => {
    // The outcome cannot be written: the send went out all the same.
    // On every shard: the account made in the test may be in any of them.
    for (const { db } of shards(env))
      await db
        .prepare(
          `CREATE TRIGGER IF NOT EXISTS settle_fails BEFORE UPDATE OF outcome ON outgoing_messages
           WHEN NEW.outcome = 'sent' BEGIN SELECT RAISE(ABORT, 'storage unavailable'); END`,
        )
        .run();
    try {
      const t = await handedSend('gw-settle', 'settle-fails');
      t.answer({ ok: true, result: { message_id: '<x@example.test>' } });
      const res = await t.response;
      expect(res.status).toBe(200);
      expect(await keyRow('settle-fails')).toEqual({ status: 'completed' });
      expect(await records(t.id)).toEqual([{ outcome: 'pending' }]);
      t.socket.ws.close(1000, 'done');
    } finally {
      for (const { db } of shards(env)) await db.prepare('DROP TRIGGER IF EXISTS settle_fails').run();
    }
  });

  it('forgets the record and frees the key only when the gateway refused the message', {
    timeout: 30_000,
  }, async () => {
    const refused = await handedSend('gw-refuses', 'refused-1');
    refused.answer({ ok: false, error: { kind: 'provider_rejected', detail: 'SMTP server refused the message: 554' } });
    expect((await refused.response).status).toBeGreaterThanOrEqual(400);
    expect(await keyRow('refused-1')).toBeNull();
    expect(await records(refused.id)).toEqual([]);
    refused.socket.ws.close(1000, 'done');

    const lost = await handedSend('gw-lost', 'lost-1');
    lost.answer({
      ok: false,
      error: { kind: 'provider_error', detail: 'SMTP 127.0.0.1:465: timed out', may_have_sent: true },
    });
    const res = await lost.response;
    expectError(res, 502, 'provider_error');
    expect((res.body as { detail: string }).detail).toMatch(/may still go out/);
    expect(await keyRow('lost-1')).toEqual({ status: 'unresolved' });
    expect(await records(lost.id)).toEqual([{ outcome: 'pending' }]);
    lost.socket.ws.close(1000, 'done');
  });
});
