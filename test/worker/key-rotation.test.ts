/**
 * Rotating CREDENTIALS_KEY: with the old key as CREDENTIALS_KEY_PREVIOUS, accounts sealed with it
 * keep getting their passwords to the gateway (the lease, what sync starts from) and are sealed
 * again with the new key on that use; the minute sweep does the same for the rest, webhook
 * endpoint secrets included; tracking links signed with the old key keep working.
 */
import { createExecutionContext } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { sealPasswords } from '../../worker/accounts/credentials.ts';
import { resealStale } from '../../worker/accounts/reseal.ts';
import { createApp } from '../../worker/app.ts';
import type { Env } from '../../worker/env.ts';
import { keyId, secretKeys, toBase64 } from '../../worker/lib/crypto.ts';
import { openUrl, verifyTrackingSignature } from '../../worker/tracking/links.ts';
import { sealEndpointSecret } from '../../worker/webhooks/signing.ts';
import { newId } from '../../worker/lib/ids.ts';
import { createSyncedAccount, gatewayCallWith } from './sync-helpers.ts';

const app = createApp();
const OLD = env.CREDENTIALS_KEY;
const NEW = toBase64(crypto.getRandomValues(new Uint8Array(32)));
const rotating = { ...env, CREDENTIALS_KEY: NEW, CREDENTIALS_KEY_PREVIOUS: OLD } as Env;
const rotated = { ...env, CREDENTIALS_KEY: NEW } as Env;

const sealedCredentials = async (id: string) =>
  (await env.DB.prepare('SELECT credentials FROM accounts WHERE id = ?').bind(id).first<{ credentials: string }>())!
    .credentials;

async function lease(callEnv: Env, accountId: string) {
  await gatewayCallWith(callEnv, '/internal/gateway/heartbeat', {
    gateway_id: 'gw-rotation',
    instance: 'proc-1',
    held: [],
    capacity: 100,
  });
  return gatewayCallWith(callEnv, `/internal/gateway/accounts/${accountId}/lease`, {
    gateway_id: 'gw-rotation',
    instance: 'proc-1',
  });
}

describe('rotating CREDENTIALS_KEY', () => {
  it('an account sealed with the old key gets its passwords to the gateway and is sealed again with the new one', async () => {
    const account = await createSyncedAccount(); // sealed with the test's CREDENTIALS_KEY: the old one
    expect(await sealedCredentials(account.id)).toMatch(new RegExp(`^v2\\.${await keyId(OLD)}\\.`));
    // The new key alone cannot open it: the lease fails rather than hand out garbage.
    expect((await lease(rotated, account.id)).status).toBe(500);

    const granted = await lease(rotating, account.id);
    expect(granted.status, JSON.stringify(granted.body)).toBe(200);
    expect(granted.body.config.imap.password).toBe('secret-imap');
    expect(granted.body.config.smtp.password).toBe('secret-smtp');
    expect(await sealedCredentials(account.id)).toMatch(new RegExp(`^v2\\.${await keyId(NEW)}\\.`));

    // Sealed with the new key now: the old key can be dropped.
    await env.DB.prepare('UPDATE accounts SET lease_expires_ms = 1 WHERE id = ?').bind(account.id).run();
    const later = await lease(rotated, account.id);
    expect(later.body.granted).toBe(true);
    expect(later.body.config.imap.password).toBe('secret-imap');
  });

  it('the sweep seals again what the old key sealed, a bounded number a run, endpoint secrets included', async () => {
    const accounts = [];
    for (let i = 0; i < 3; i++) accounts.push(await createSyncedAccount());
    const endpointId = newId('endpoint');
    const now = new Date().toISOString();
    await env.DB.prepare(
      `INSERT INTO webhook_endpoints (id, url, description, trigger_events_json, account_ids_json, headers_json, secret, enabled, created_at, updated_at)
       VALUES (?, 'https://hooks.example.com/x', '', '["email.new"]', '[]', '[]', ?, 1, ?, ?)`,
    )
      .bind(endpointId, await sealEndpointSecret(secretKeys(env), endpointId, 'whsec_c2VjcmV0'), now, now)
      .run();

    // One sealed with a third key, which neither key opens: never picked, so it cannot hold the sweep up.
    const stranger = await createSyncedAccount();
    const third = { ...env, CREDENTIALS_KEY: toBase64(crypto.getRandomValues(new Uint8Array(32))) } as Env;
    const strangeSeal = await sealPasswords(third, stranger.id, { imap_password: 'x', smtp_password: 'y' });
    await env.DB.prepare('UPDATE accounts SET credentials = ? WHERE id = ?').bind(strangeSeal, stranger.id).run();

    expect(await resealStale(rotated)).toEqual({ accounts: 0, endpoints: 0, unreadable: 0 }); // no previous key: nothing to do
    const report = await resealStale(rotating);
    expect(report.accounts).toBeGreaterThanOrEqual(3);
    expect(report.endpoints).toBeGreaterThanOrEqual(1);
    expect(report.unreadable).toBe(0);
    for (const account of accounts)
      expect(await sealedCredentials(account.id)).toMatch(new RegExp(`^v2\\.${await keyId(NEW)}\\.`));
    expect(await resealStale(rotating)).toEqual({ accounts: 0, endpoints: 0, unreadable: 0 });
    expect(await sealedCredentials(stranger.id)).toBe(strangeSeal);

    const ctx = createExecutionContext();
    const listed = await app.fetch(
      new Request(`https://mail.example.com/api/v1/webhooks/endpoints/${endpointId}`, {
        headers: { 'X-API-KEY': 'test-admin-key' },
      }),
      rotated,
      ctx,
    );
    expect(((await listed.json()) as { secret: string }).secret).toBe('whsec_c2VjcmV0');
  });

  it('tracking links signed with the old key stay valid while it is the previous key', async () => {
    const trackingId = newId('tracking');
    const url = new URL(await openUrl(env, 'https://mail.example.com', trackingId));
    const given = url.searchParams.get('s') ?? undefined;
    expect(await verifyTrackingSignature(rotating, 'open', trackingId, '', given)).toBe(true);
    expect(await verifyTrackingSignature(rotated, 'open', trackingId, '', given)).toBe(false);
  });
});
