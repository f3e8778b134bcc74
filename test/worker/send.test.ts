// Sending and drafts inside workerd: validation, Idempotency-Key, tracking links, origin api on sync,
// and bounces arriving through the account object.
import { runInDurableObject } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { exports } from 'cloudflare:workers';
import { describe, expect, it, vi } from 'vitest';
import { applyTracking, clickUrl, openUrl, verifyTrackingSignature } from '../../worker/tracking/links.ts';
import { fromBase64 } from '../../worker/lib/crypto.ts';
import { newId } from '../../worker/lib/ids.ts';
import { normalizeAddress } from '../../worker/ingest/parse.ts';
import { recordOutgoing } from '../../worker/send/outgoing.ts';
import { requestHash } from '../../worker/send/idempotency.ts';
import { openSocket } from './gateway-socket.ts';
import { api, expectError } from './helpers.ts';
import { accountDb, createSyncedAccount, gatewayCall, messageIn, outbox, rawMessage } from './sync-helpers.ts';
import { shards } from '../../worker/shards/registry.ts';

const base = 'https://mail.example.com';
const send = (body: unknown, headers: Record<string, string> = {}) => api('POST', '/emails', { body, headers });
const outgoingCount = async (accountId: string) =>
  (await (
    await accountDb(accountId)
  )
    .prepare('SELECT COUNT(*) AS n FROM outgoing_messages WHERE account_id = ?')
    .bind(accountId)
    .first<{ n: number }>())!.n;

describe('POST /emails: validation (nothing reaches a gateway)', () => {
  it('refuses bad requests with 400 or 404 in the error shape', async () => {
    const { id } = await createSyncedAccount();
    const ok = { account_id: id, to: [{ identifier: 'bob@example.test' }], subject: 'hi', body: '<p>hi</p>' };
    const cases: [unknown, number, string, RegExp][] = [
      [
        { ...ok, custom_headers: [{ name: 'Received', value: 'x' }] },
        400,
        'invalid_parameters',
        /custom_headers\.0\.name/,
      ],
      [
        { ...ok, custom_headers: [{ name: 'X-Tag', value: 'a\r\nBcc: evil@example.test' }] },
        400,
        'invalid_parameters',
        /CR, LF or NUL/,
      ],
      [{ ...ok, custom_headers: [{ name: 'X-Tag\r\nBcc', value: 'x' }] }, 400, 'invalid_parameters', /custom_headers/],
      [{ ...ok, subject: 'hi\nBcc: evil@example.test' }, 400, 'invalid_parameters', /subject/],
      [
        { ...ok, to: [{ identifier: 'bob@example.test', display_name: 'Bob\r\nX: y' }] },
        400,
        'invalid_parameters',
        /display_name/,
      ],
      [{ ...ok, to: [{ identifier: 'bob@example.test\n' }] }, 400, 'invalid_parameters', /identifier/],
      [{ ...ok, to: [{ identifier: 'not an address' }] }, 400, 'invalid_parameters', /identifier/],
      [{ ...ok, to: [] }, 400, 'invalid_parameters', /recipient/],
      [{ ...ok, attachments: [{ name: 'a.txt', content: 'not base64!' }] }, 400, 'invalid_parameters', /base64/],
      [{ ...ok, account_id: 'acc_nope' }, 404, 'not_found', /Account/],
      [{ ...ok, account_id: newId('account') }, 404, 'not_found', /Account/],
      [{ ...ok, reply_to: newId('email') }, 404, 'not_found', /reply_to/],
    ];
    for (const [body, status, type, detail] of cases) {
      const res = await send(body);
      expect(expectError(res, status, type).detail, JSON.stringify(body)).toMatch(detail);
    }
    expect(await outgoingCount(id)).toBe(0);
  });

  it('accepts the allowed custom headers and multipart fields, then answers 502 without a gateway', {
    timeout: 30_000,
  }, async () => {
    const { id } = await createSyncedAccount();
    const form = new FormData();
    form.set('account_id', id);
    form.set('to', JSON.stringify([{ identifier: 'bob@example.test' }]));
    form.set(
      'custom_headers',
      JSON.stringify([
        { name: 'List-Unsubscribe', value: '<mailto:u@example.test>' },
        { name: 'X-Campaign', value: '7' },
      ]),
    );
    form.append(
      'attachments',
      new File([new Uint8Array([1, 2, 3])], 'three.bin', { type: 'application/octet-stream' }),
    );
    const started = Date.now();
    const res = await api('POST', '/emails', { rawBody: form });
    expectError(res, 502, 'provider_error');
    expect(Date.now() - started).toBeLessThan(20_000);
    // The failed send left no record behind (and no blob waiting for a gateway).
    expect(await outgoingCount(id)).toBe(0);
    expect((await env.BLOBS.list({ prefix: `outgoing/${id}/` })).objects).toEqual([]);
  });

  it('every JSON body refuses unknown fields with a 400 naming them (docs/api.md)', async () => {
    const { id } = await createSyncedAccount();
    const ok = { account_id: id, to: [{ identifier: 'bob@example.test' }], subject: 'hi', body: '<p>hi</p>' };
    const named = async (res: Awaited<ReturnType<typeof api>>, ...fields: string[]) => {
      const { detail } = expectError(res, 400, 'invalid_parameters');
      for (const field of fields) expect(detail).toContain(field);
    };
    await named(await send({ ...ok, tracking_options: { opens: true, links: true } }), 'tracking_options', 'links');
    await named(await send({ ...ok, sender: 'x', cc_list: [] }), 'sender', 'cc_list');
    await named(await send({ ...ok, to: [{ identifier: 'bob@example.test', name: 'Bob' }] }), 'to.0', 'name');
    await named(await api('POST', '/drafts', { body: { ...ok, priority: 'high' } }), 'priority');
    await named(await api('POST', '/drafts', { body: { ...ok, draft_id: newId('draft') } }), 'draft_id');
    const form = new FormData();
    form.set('account_id', id);
    form.set('to', JSON.stringify([{ identifier: 'bob@example.test' }]));
    form.set('tracking', 'yes');
    await named(await api('POST', '/emails', { rawBody: form }), 'tracking');
    await named(await api('PUT', `/emails/${newId('email')}`, { body: { unread: true, flagged: true } }), 'flagged');
    await named(await api('PATCH', `/accounts/${id}`, { body: { metadata: {}, nickname: 'x' } }), 'nickname');
    await named(await api('POST', '/api-keys', { body: { name: 'k', scope: 'all' } }), 'scope');
    await named(
      await api('POST', '/webhooks/endpoints', {
        body: { url: 'https://hooks.example.com/x', trigger_events: ['email.new'], secret: 'whsec_x' },
      }),
      'secret',
    );
    await named(
      await api('POST', '/auth/intent', {
        body: { provider: 'imap', email: 'a@example.com', password: 'p', pass: 'p' },
      }),
      'pass',
    );
    // A draft_id naming no saved draft of the account is a 404, before anything is sent.
    expectError(await send({ ...ok, draft_id: newId('draft') }), 404, 'not_found');
    expect(await outgoingCount(id)).toBe(0);
  });

  it('enum-valued fields take any case', async () => {
    const res = await api('POST', '/webhooks/endpoints', {
      body: { url: 'https://hooks.example.com/x', trigger_events: ['EMAIL.NEW', 'Email.Update'] },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.trigger_events).toEqual(['email.new', 'email.update']);
    expectError(
      await api('POST', '/webhooks/endpoints', {
        body: { url: 'https://hooks.example.com/x', trigger_events: ['email.sent'] },
      }),
      400,
      'invalid_parameters',
    );
  });

  it('refuses bodies over 30 MB with 413', async () => {
    const res = await api('POST', '/emails', {
      rawBody: new Uint8Array(31 * 1024 * 1024),
      headers: { 'Content-Type': 'application/json' },
    });
    expectError(res, 413, 'payload_too_large');
  });
});

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

describe('tracking', () => {
  it('rewrites http(s) links, adds the pixel, and signs both', async () => {
    const html =
      '<html><body><p><a href="https://example.org/a?x=1&amp;y=2">a</a> <a href="mailto:x@example.org">m</a></p></body></html>';
    const out = await applyTracking(env, html, { base, trackingId: 'trk_TEST', opens: true, clicks: true });
    expect(out).toContain('mailto:x@example.org');
    expect(out).not.toContain('href="https://example.org');
    const click = /href="([^"]+)"/.exec(out)![1]!.replace(/&amp;/g, '&');
    const url = new URL(click);
    expect(url.pathname).toBe('/t/click/trk_TEST');
    expect(url.searchParams.get('u')).toBe('https://example.org/a?x=1&y=2');
    expect(
      await verifyTrackingSignature(
        env,
        'click',
        'trk_TEST',
        'https://example.org/a?x=1&y=2',
        url.searchParams.get('s')!,
      ),
    ).toBe(true);
    expect(
      await verifyTrackingSignature(env, 'click', 'trk_TEST', 'https://evil.example/', url.searchParams.get('s')!),
    ).toBe(false);
    expect(out).toMatch(/<img src="https:\/\/mail\.example\.com\/t\/open\/trk_TEST\?s=[\w-]+"[^>]*><\/body>/);
  });

  it('records opens and clicks of a sent email whose copy synced, and refuses tampered links', async () => {
    const account = await createSyncedAccount();
    await account.stub.acquireLease('gw-1');
    const trackingId = newId('tracking');
    const messageId = `<sent-${crypto.randomUUID()}@example.test>`;
    await recordOutgoing(account.db, {
      account_id: account.id,
      message_id: messageId,
      kind: 'send',
      tracking_id: trackingId,
      tracking_label: 'spring',
      draft_id: null,
      created_at: new Date().toISOString(),
    });
    await account.stub.applyChanges('gw-1', [
      {
        type: 'messages',
        path: 'Sent',
        uidvalidity: 1,
        messages: [messageIn(1, rawMessage({ from: account.email, to: 'bob@example.test', messageId }), ['\\Seen'])],
      },
    ]);
    const created = (await outbox(account.id)).find((e) => e.type === 'email.new')!;
    expect(created.data).toMatchObject({ origin: 'api', tracking_id: trackingId, message_id: messageId, role: 'SENT' });

    const open = await exports.default.fetch(await openUrl(env, base, trackingId), {
      headers: { 'User-Agent': 'UA/1', 'CF-Connecting-IP': '203.0.113.9' },
    });
    expect(open.status).toBe(200);
    expect(open.headers.get('content-type')).toBe('image/gif');
    const target = 'https://example.org/landing?q=1';
    const click = await exports.default.fetch(await clickUrl(env, base, trackingId, target), {
      redirect: 'manual',
      headers: { 'User-Agent': 'UA/2' },
    });
    expect(click.status).toBe(302);
    expect(click.headers.get('location')).toBe(target);

    const events = (await outbox(account.id)).filter((e) => e.type.startsWith('tracking.'));
    expect(events).toEqual([
      {
        type: 'tracking.open',
        data: {
          email_id: created.data.id,
          tracking_id: trackingId,
          user_agent: 'UA/1',
          ip: '203.0.113.9',
          label: 'spring',
        },
      },
      {
        type: 'tracking.click',
        data: {
          email_id: created.data.id,
          tracking_id: trackingId,
          url: target,
          user_agent: 'UA/2',
          ip: '',
          label: 'spring',
        },
      },
    ]);

    const tampered = new URL(await clickUrl(env, base, trackingId, target));
    tampered.searchParams.set('u', 'https://evil.example/');
    for (const url of [
      tampered.toString(),
      `${base}/t/click/${trackingId}?u=${encodeURIComponent(target)}`,
      `${base}/t/open/${trackingId}?s=AAAA`,
      `${base}/t/open/${trackingId}`,
    ]) {
      const res = await exports.default.fetch(url, { redirect: 'manual' });
      expect(res.status, url).toBe(404);
      expect(((await res.json()) as { type: string }).type).toBe('errors/not_found');
    }
    expect((await outbox(account.id)).filter((e) => e.type.startsWith('tracking.'))).toHaveLength(2);
  });

  it('gives a synced draft the draft_id it was created with', async () => {
    const account = await createSyncedAccount();
    await account.stub.acquireLease('gw-1');
    const draftId = newId('draft');
    const messageId = `<draft-${crypto.randomUUID()}@example.test>`;
    await recordOutgoing(account.db, {
      account_id: account.id,
      message_id: messageId,
      kind: 'draft',
      tracking_id: null,
      tracking_label: null,
      draft_id: draftId,
      created_at: new Date().toISOString(),
    });
    await account.stub.applyChanges('gw-1', [
      {
        type: 'messages',
        path: 'Drafts',
        uidvalidity: 1,
        messages: [messageIn(1, rawMessage({ messageId }), ['\\Draft', '\\Seen'])],
      },
    ]);
    const event = (await outbox(account.id)).find((e) => e.type === 'email.draft.new')!;
    expect(event.data).toMatchObject({ object: 'Draft', draft_id: draftId, origin: 'api' });
  });
});

describe('bounces through the account object', () => {
  const fixtures = (env as unknown as { TEST_FIXTURES: Record<string, string> }).TEST_FIXTURES;
  const manifest = JSON.parse(new TextDecoder().decode(fromBase64(fixtures['bounces/manifest.json']!))) as Record<
    string,
    string
  >;
  const asMessage = (uid: number, path: string) => {
    const raw = fixtures[path]!;
    return { uid, flags: [], internal_date: new Date().toISOString(), size: fromBase64(raw).length, raw };
  };

  async function ingest(paths: string[]) {
    const account = await createSyncedAccount();
    await account.stub.acquireLease('gw-1');
    for (let i = 0; i < paths.length; i += 25) {
      const messages = paths.slice(i, i + 25).map((p, k) => asMessage(i + k + 1, p));
      const applied = await account.stub.applyChanges('gw-1', [
        { type: 'messages', path: 'INBOX', uidvalidity: 1, messages },
      ]);
      expect(applied.ok).toBe(true);
    }
    const { results } = await account.db
      .prepare('SELECT ef.uid, ef.email_id FROM email_folders ef WHERE ef.account_id = ?')
      .bind(account.id)
      .all<{ uid: number; email_id: string }>();
    const pathOf = new Map(results.map((r) => [r.email_id, paths[r.uid - 1]!]));
    return { events: await outbox(account.id), pathOf };
  }

  it('emits one email.new.bounce with the failed recipient for each of 50+ real bounces', {
    timeout: 120_000,
  }, async () => {
    const paths = Object.keys(manifest).map((p) => `bounces/${p}`);
    expect(paths.length).toBeGreaterThanOrEqual(50);
    const { events, pathOf } = await ingest(paths);
    const bounces = events.filter((e) => e.type === 'email.new.bounce');
    const byPath = new Map<string, any[]>();
    for (const b of bounces)
      byPath.set(pathOf.get(b.data.email_id)!, [...(byPath.get(pathOf.get(b.data.email_id)!) ?? []), b.data]);
    const wrong: string[] = [];
    for (const [path, recipient] of Object.entries(manifest)) {
      const found = byPath.get(`bounces/${path}`) ?? [];
      if (found.length !== 1 || normalizeAddress(found[0].recipient) !== normalizeAddress(recipient)) {
        wrong.push(
          `${path}: expected one bounce for ${recipient}, got ${JSON.stringify(found.map((f) => f.recipient))}`,
        );
      }
    }
    expect(wrong).toEqual([]);
    expect(events.filter((e) => e.type === 'email.new')).toHaveLength(paths.length);
  });

  it('never emits email.new.bounce for ordinary mail', { timeout: 300_000 }, async () => {
    const corpus = Object.keys(fixtures).filter(
      (p) => p.startsWith('corpus/') && !p.endsWith('.json') && !p.endsWith('.md'),
    );
    expect(corpus.length).toBeGreaterThan(100);
    const { events } = await ingest(corpus);
    expect(events.filter((e) => e.type === 'email.new').length).toBeGreaterThan(100);
    expect(events.filter((e) => e.type === 'email.new.bounce')).toEqual([]);
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
