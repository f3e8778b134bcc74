// Webhook endpoints: create (a Standard Webhooks secret, stored encrypted), list, change and delete,
// the 400s and 404s, and the URLs refused unless private webhook URLs are allowed.
import { env } from 'cloudflare:workers';
import { beforeEach, describe, expect, it } from 'vitest';
import { newId } from '../../worker/lib/ids.ts';
import { createEndpointBody } from '../../worker/webhooks/endpoints.ts';
import { webhookUrlProblem } from '../../worker/webhooks/url.ts';
import { api, expectError } from './helpers.ts';
import { createEndpoint, emptyWebhookTables, HOOK_URL, insertAccount } from './webhook-helpers.ts';

beforeEach(emptyWebhookTables);

describe('webhook endpoints', () => {
  it('creates an endpoint with a Standard Webhooks secret, stored encrypted', async () => {
    const account = await insertAccount();
    const created = await createEndpoint({
      description: 'orders',
      trigger_events: ['email.new', 'account.add', 'email.new'],
      account_ids: [account],
      headers: [{ key: 'Authorization', value: 'Bearer abc' }],
    });
    expect(created).toEqual({
      object: 'WebhookEndpoint',
      id: expect.stringMatching(/^we_[0-9A-HJKMNP-TV-Z]{26}$/),
      url: HOOK_URL,
      description: 'orders',
      trigger_events: ['email.new', 'account.add'],
      account_ids: [account],
      headers: [{ key: 'Authorization', value: 'Bearer abc' }],
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
      enabled: true,
      created_at: expect.any(String),
    });
    expect(atob(created.secret.slice('whsec_'.length))).toHaveLength(32);
    const stored = await env.DB.prepare('SELECT secret FROM webhook_endpoints WHERE id = ?')
      .bind(created.id)
      .first<{ secret: string }>();
    expect(stored!.secret).not.toContain(created.secret.slice(6, 20));

    const fetched = await api('GET', `/webhooks/endpoints/${created.id}`);
    expect(fetched.status).toBe(200);
    expect(fetched.body).toEqual(created);
  });

  it('lists endpoints newest first with offset paging', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await createEndpoint({ description: `e${i}` })).id);
    const first = await api('GET', '/webhooks/endpoints?limit=2');
    expect(first.status).toBe(200);
    expect(first.body.object).toBe('WebhookEndpoints');
    expect(first.body.data.map((e: any) => e.id)).toEqual([ids[2], ids[1]]);
    expect(first.body.has_more).toBe(true);
    expect(first.body.data[0].secret).toMatch(/^whsec_/);
    const rest = await api('GET', '/webhooks/endpoints?limit=2&offset=2');
    expect(rest.body).toMatchObject({ data: [{ id: ids[0] }], has_more: false });
    expectError(await api('GET', '/webhooks/endpoints?limit=0'), 400, 'invalid_parameters');
  });

  it('PATCH changes only the given fields and keeps id and secret', async () => {
    const created = await createEndpoint({ description: 'before', headers: [{ key: 'X-Tenant', value: 't1' }] });
    const patched = await api('PATCH', `/webhooks/endpoints/${created.id}`, {
      body: { trigger_events: ['account.add'], enabled: false },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toEqual({ ...created, trigger_events: ['account.add'], enabled: false });
    const empty = await api('PATCH', `/webhooks/endpoints/${created.id}`, { body: {} });
    expect(empty.body).toEqual(patched.body);

    for (const body of [
      { trigger_events: ['email.nope'] },
      { url: 'ftp://x.example.com' },
      { enabled: 'no' },
      { secret: 'whsec_x' },
    ]) {
      expectError(await api('PATCH', `/webhooks/endpoints/${created.id}`, { body }), 400, 'invalid_parameters');
    }
    expect((await api('GET', `/webhooks/endpoints/${created.id}`)).body).toEqual(patched.body);
  });

  it('DELETE answers {success: true}, after which the endpoint is gone', async () => {
    const created = await createEndpoint();
    const deleted = await api('DELETE', `/webhooks/endpoints/${created.id}`);
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ success: true });
    expectError(await api('GET', `/webhooks/endpoints/${created.id}`), 404, 'not_found');
    expectError(await api('DELETE', `/webhooks/endpoints/${created.id}`), 404, 'not_found');
    expect((await api('GET', '/webhooks/endpoints')).body.data).toEqual([]);
  });

  it.each([
    ['malformed', 'we_nope'],
    ['of the wrong type', newId('account')],
    ['unknown', newId('endpoint')],
  ])('answers 404 for an id that is %s', async (_label, id) => {
    expectError(await api('GET', `/webhooks/endpoints/${id}`), 404, 'not_found');
    expectError(await api('PATCH', `/webhooks/endpoints/${id}`, { body: { enabled: false } }), 404, 'not_found');
    expectError(await api('DELETE', `/webhooks/endpoints/${id}`), 404, 'not_found');
  });

  it.each([
    ['a missing url', { url: undefined }, 'url'],
    ['a relative url', { url: '/hook' }, 'url'],
    ['an ftp url', { url: 'ftp://hooks.example.com/' }, 'url'],
    ['a url with credentials', { url: 'https://user:pw@hooks.example.com/' }, 'url'],
    ['missing trigger_events', { trigger_events: undefined }, 'trigger_events'],
    ['empty trigger_events', { trigger_events: [] }, 'trigger_events'],
    ['an unknown event type', { trigger_events: ['email.new', 'email.exploded'] }, 'email.exploded'],
    ['a header value with CR/LF', { headers: [{ key: 'X-A', value: 'a\r\nX-B: b' }] }, 'headers.0.value'],
    ['a header name with a space', { headers: [{ key: 'X A', value: 'a' }] }, 'headers.0.key'],
    ['a Content-Type header', { headers: [{ key: 'content-type', value: 'text/plain' }] }, 'headers.0.key'],
    ['a webhook-* header', { headers: [{ key: 'Webhook-Signature', value: 'v1,x' }] }, 'headers.0.key'],
    ['the signature header', { headers: [{ key: 'X-Email-Engine-Signature', value: 'x' }] }, 'headers.0.key'],
    [
      'a repeated header',
      {
        headers: [
          { key: 'X-A', value: '1' },
          { key: 'x-a', value: '2' },
        ],
      },
      'headers',
    ],
    ['a non-boolean enabled', { enabled: 'yes' }, 'enabled'],
    ['an unknown field', { colour: 'red' }, 'colour'],
  ])('refuses %s with 400 naming it', async (_label, fields, param) => {
    const body = { url: HOOK_URL, trigger_events: ['email.new'], ...fields };
    const error = expectError(await api('POST', '/webhooks/endpoints', { body }), 400, 'invalid_parameters');
    expect(error.detail).toContain(param);
  });

  it('answers 404 for account_ids naming no account', async () => {
    expectError(
      await api('POST', '/webhooks/endpoints', {
        body: { url: HOOK_URL, trigger_events: ['email.new'], account_ids: [newId('account')] },
      }),
      404,
      'not_found',
    );
    expectError(
      await api('POST', '/webhooks/endpoints', {
        body: { url: HOOK_URL, trigger_events: ['email.new'], account_ids: ['acc_bad'] },
      }),
      404,
      'not_found',
    );
    expect((await api('GET', '/webhooks/endpoints')).body.data).toEqual([]);
  });

  it('refuses private, loopback and link-local URLs unless ALLOW_PRIVATE_WEBHOOK_URLS is true', () => {
    const refused = [
      'http://localhost:3000/hook',
      'http://api.localhost/hook',
      'http://printer.local/hook',
      'http://intranet/hook',
      'http://127.0.0.1/hook',
      'http://2130706433/hook', // 127.0.0.1 written as a number
      'http://10.1.2.3/hook',
      'http://172.16.0.1/hook',
      'http://192.168.1.1/hook',
      'http://169.254.169.254/latest/meta-data',
      'http://100.64.0.1/hook',
      'http://0.0.0.0/hook',
      'http://[::1]/hook',
      'http://[::]/hook',
      'http://[fe80::1]/hook',
      'http://[fd12:3456::1]/hook',
      'http://[::ffff:127.0.0.1]/hook',
      'http://[::ffff:10.0.0.1]/hook',
    ];
    for (const url of refused) {
      expect(webhookUrlProblem(url, false), url).toMatch(/public host/);
      expect(webhookUrlProblem(url, true), url).toBeNull();
      const parsed = createEndpointBody(false).safeParse({ url, trigger_events: ['email.new'] });
      expect(parsed.success, url).toBe(false);
    }
    for (const url of [
      'https://hooks.example.com/x',
      'http://8.8.8.8/hook',
      'http://172.32.0.1/',
      'http://[2606:4700::1111]/hook',
    ]) {
      expect(webhookUrlProblem(url, false), url).toBeNull();
    }
    expect(createEndpointBody(false).safeParse({ url: HOOK_URL, trigger_events: ['email.new'] }).success).toBe(true);
  });
});
