/**
 * What the public can make the service do: connect to hosts in the operator's network (auth intent),
 * send passwords in clear, flood the outbox through a tracking link, or point webhooks at ranges
 * that reach private addresses.
 */
import { createExecutionContext } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import type { Env } from '../../worker/env.ts';
import { RATE_LIMIT } from '../../worker/tracking/limits.ts';
import { clickUrl, openUrl } from '../../worker/tracking/links.ts';
import { webhookUrlProblem } from '../../worker/webhooks/url.ts';
import worker from '../../worker/index.ts';
import { ADMIN_KEY, expectError } from './helpers.ts';
import { insertTrackedSend } from './webhook-helpers.ts';

/** POST /auth/intent with the operator settings given (the test config allows both). */
async function authIntent(body: Record<string, unknown>, settings: Partial<Env>) {
  const response = await worker.fetch(
    new Request('https://mail.example.com/api/v1/auth/intent', {
      method: 'POST',
      headers: { 'X-API-KEY': ADMIN_KEY, 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    }),
    { ...env, ...settings } as Env,
    createExecutionContext(),
  );
  return { status: response.status, body: (await response.json()) as any, headers: response.headers };
}

const intent = (fields: Record<string, unknown>) => ({
  provider: 'imap',
  email: 'user@example.org',
  password: 'secret',
  imap_host: 'imap.example.org',
  smtp_host: 'smtp.example.org',
  ...fields,
});

const STRICT = { ALLOW_PRIVATE_MAIL_HOSTS: 'false', ALLOW_PLAINTEXT_MAIL: 'false' };

describe('auth intent: mail hosts and encryption', () => {
  it.each([
    '127.0.0.1',
    '10.0.0.1',
    '[::1]',
    '::1',
    '169.254.169.254',
    'localhost',
    'mail.localhost',
    '0x7f.1',
    '[::ffff:10.0.0.1]',
    'fd00::25',
    'intranet',
  ])('refuses the private host %s (400 naming the field) unless the operator allows it', async (host) => {
    for (const field of ['imap_host', 'smtp_host']) {
      const refused = expectError(await authIntent(intent({ [field]: host }), STRICT), 400, 'invalid_parameters');
      expect(refused.detail).toMatch(new RegExp(`^${field}: must be a public host`));
    }
    // Allowed: the request goes on to the gateway (none is connected in this test: 502).
    const allowed = await authIntent(intent({ imap_host: host, smtp_host: host }), {
      ...STRICT,
      ALLOW_PRIVATE_MAIL_HOSTS: 'true',
    });
    expectError(allowed, 502, 'provider_error');
  });

  it('refuses encryption NONE unless ALLOW_PLAINTEXT_MAIL is true', async () => {
    for (const field of ['imap_encryption', 'smtp_encryption']) {
      const refused = expectError(await authIntent(intent({ [field]: 'NONE' }), STRICT), 400, 'invalid_parameters');
      expect(refused.detail).toMatch(new RegExp(`^${field}: NONE`));
    }
    const allowed = await authIntent(intent({ imap_encryption: 'NONE', smtp_encryption: 'NONE' }), {
      ...STRICT,
      ALLOW_PLAINTEXT_MAIL: 'true',
    });
    expectError(allowed, 502, 'provider_error');
  });

  it('lets public hosts with SSL or STARTTLS through to the gateway', async () => {
    expectError(
      await authIntent(intent({ imap_encryption: 'STARTTLS', imap_port: 143 }), STRICT),
      502,
      'provider_error',
    );
    expectError(await authIntent(intent({ imap_host: '93.184.215.14' }), STRICT), 502, 'provider_error');
  });
});

describe('tracking hits', () => {
  /** A hit from `address` (each address has its own budget of hits, tracking/limits.ts). */
  async function hit(url: string, address = '198.51.100.1') {
    const request = new Request(url, { headers: { 'CF-Connecting-IP': address } });
    const response = await worker.fetch(request, env, createExecutionContext());
    await response.arrayBuffer();
    return response.status;
  }

  const trackingEvents = async (trackingId: string) =>
    (
      await env.DB.prepare(
        "SELECT type FROM events WHERE type LIKE 'tracking.%' AND json_extract(data_json, '$.tracking_id') = ?",
      )
        .bind(trackingId)
        .all<{ type: string }>()
    ).results.map((r) => r.type);

  // 1,000 requests through workerd: seconds on a loaded 2-core machine, so no 5 s default.
  it('1,000 hits on one pixel from 1,000 addresses make one open event; every hit gets the pixel', {
    timeout: 120_000,
  }, async () => {
    const trackingId = await insertTrackedSend();
    const pixel = await openUrl(env, 'https://mail.example.com', trackingId);
    for (let round = 0; round < 20; round++) {
      const statuses = await Promise.all(Array.from({ length: 50 }, (_, i) => hit(pixel, `10.0.${round}.${i}`)));
      expect(statuses.every((s) => s === 200)).toBe(true);
    }
    expect(await trackingEvents(trackingId)).toEqual(['tracking.open']);
  });

  it(`repeats of a click are one event, and one tracking id makes at most ${RATE_LIMIT} events`, async () => {
    const trackingId = await insertTrackedSend();
    const link = await clickUrl(env, 'https://mail.example.com', trackingId, 'https://example.com/a');
    for (let i = 0; i < 20; i++) expect(await hit(link)).toBe(302);
    expect(await trackingEvents(trackingId)).toEqual(['tracking.click']);
    for (let i = 0; i < RATE_LIMIT + 20; i++) {
      expect(await hit(await clickUrl(env, 'https://mail.example.com', trackingId, `https://example.com/${i}`))).toBe(
        302,
      );
    }
    expect(await trackingEvents(trackingId)).toHaveLength(RATE_LIMIT);
  });
});

describe('webhook URL guard', () => {
  it.each([
    'http://[64:ff9b::7f00:1]/', // NAT64 of 127.0.0.1
    'http://[64:ff9b::808:808]/', // NAT64 of a public address: the translator is not ours either
    'http://[64:ff9b:1::a00:1]/', // local-use NAT64
    'http://[2002:7f00:1::]/', // 6to4 of 127.0.0.1
    'http://[2002:808:808::1]/',
    'http://[fec0::1]/', // site-local
    'http://[fefe::1]/',
  ])('refuses %s', (url) => {
    expect(webhookUrlProblem(url, false)).toMatch(/public host/);
    expect(webhookUrlProblem(url, true)).toBeNull();
  });

  it('still accepts public IPv6 and IPv4 hosts', () => {
    expect(webhookUrlProblem('https://[2606:4700::6810:84e5]/hook', false)).toBeNull();
    expect(webhookUrlProblem('https://[64:ff9c::1]/hook', false)).toBeNull();
    expect(webhookUrlProblem('https://93.184.215.14/hook', false)).toBeNull();
  });
});
