// POST /emails refusing what it cannot send before anything reaches a gateway: bad requests, unknown
// fields, bodies over 30 MB; enum values taken in any case, and the custom headers and multipart
// fields it accepts.
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { newId } from '../../worker/lib/ids.ts';
import { api, expectError } from './helpers.ts';
import { send } from './send-helpers.ts';
import { accountDb, createSyncedAccount } from './sync-helpers.ts';

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
