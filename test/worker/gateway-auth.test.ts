/**
 * The gateway's side door refuses replays: a signed call, or the control socket's signed upgrade,
 * is accepted once. Unsigned calls are refused before their body is read, and bodies are capped.
 */
import { env, exports } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { GATEWAY_SIGNATURE_HEADER, signRequest } from '../../common/signing.ts';
import { MAX_INTERNAL_BODY_BYTES } from '../../worker/gateways/auth.ts';
import { expectError } from './helpers.ts';
import { GATEWAY_SECRET } from './sync-helpers.ts';

const BASE = 'https://mail.example.com';

async function send(path: string, init: RequestInit) {
  const response = await exports.default.fetch(`${BASE}${path}`, init);
  const text = response.webSocket ? '' : await response.text();
  let body: any = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: response.status, body, headers: response.headers, webSocket: response.webSocket };
}

describe('signed gateway calls', () => {
  it('accepts a signed call once and refuses the same signature again', async () => {
    const path = '/internal/gateway/heartbeat';
    const body = JSON.stringify({ gateway_id: 'gw-replay', instance: 'proc-1', held: [], capacity: 10 });
    const signature = await signRequest(GATEWAY_SECRET, { method: 'POST', path, body });
    const init = () => ({
      method: 'POST',
      headers: { 'Content-Type': 'application/json', [GATEWAY_SIGNATURE_HEADER]: signature },
      body,
    });
    const first = await send(path, init());
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expectError(await send(path, init()), 401, 'unauthorized');
    // A fresh signature over the same body is a new call.
    const again = await signRequest(GATEWAY_SECRET, { method: 'POST', path, body });
    const second = await send(path, { ...init(), headers: { [GATEWAY_SIGNATURE_HEADER]: again } });
    expect(second.status).toBe(200);
  });

  it('refuses a signature made with another secret, for another path, or in the old format', async () => {
    const path = '/internal/gateway/heartbeat';
    const body = JSON.stringify({ gateway_id: 'gw-x', instance: 'proc-1', held: [], capacity: 10 });
    for (const signature of [
      await signRequest('not-the-secret', { method: 'POST', path, body }),
      await signRequest(GATEWAY_SECRET, { method: 'POST', path: '/internal/gateway/other', body }),
      `t=${Math.floor(Date.now() / 1000)},v1=${'0'.repeat(64)}`,
    ]) {
      expectError(
        await send(path, { method: 'POST', headers: { [GATEWAY_SIGNATURE_HEADER]: signature }, body }),
        401,
        'unauthorized',
      );
    }
  });

  it('refuses an unsigned call before reading it, and a body over the cap before reading it', async () => {
    // The body never ends: an answer that waited for it would never come.
    const unreadable = () =>
      new ReadableStream({
        start(controller) {
          controller.enqueue(new TextEncoder().encode('{"gateway_id":'));
        },
        pull: () => new Promise(() => {}),
      });
    expectError(
      await send('/internal/gateway/heartbeat', { method: 'POST', body: unreadable(), duplex: 'half' } as RequestInit),
      401,
      'unauthorized',
    );
    const signature = await signRequest(GATEWAY_SECRET, {
      method: 'POST',
      path: '/internal/gateway/heartbeat',
      body: '',
    });
    const tooBig = await send('/internal/gateway/heartbeat', {
      method: 'POST',
      headers: { [GATEWAY_SIGNATURE_HEADER]: signature, 'Content-Length': String(MAX_INTERNAL_BODY_BYTES + 1) },
      body: unreadable(),
      duplex: 'half',
    } as RequestInit);
    expectError(tooBig, 413, 'payload_too_large');
  });
});

describe('the control socket credential', () => {
  const gatewayId = 'gw-credential';
  const path = `/internal/gateway/connect?gateway_id=${gatewayId}&instance=proc-1`;

  it('opens the socket with signed headers once; the same headers again are refused', async () => {
    const signature = await signRequest(GATEWAY_SECRET, { method: 'GET', path, body: '' });
    const upgrade = () => ({ headers: { Upgrade: 'websocket', [GATEWAY_SIGNATURE_HEADER]: signature } });
    const first = await send(path, upgrade());
    expect(first.status).toBe(101);
    first.webSocket!.accept();
    const replayed = await send(path, upgrade());
    expectError(replayed, 401, 'unauthorized');
    // The first socket is still the gateway's: the replay neither replaced nor closed it.
    const row = await env.DB.prepare('SELECT connected FROM gateways WHERE id = ?')
      .bind(gatewayId)
      .first<{ connected: number }>();
    expect(row?.connected).toBe(1);
    expect(first.webSocket!.readyState).toBe(WebSocket.OPEN);
    first.webSocket!.close(1000, 'done');
  });

  it('refuses a signature in the query string, and one for another gateway id', async () => {
    const signature = await signRequest(GATEWAY_SECRET, { method: 'GET', path, body: '' });
    const inQuery = await send(`${path}&sig=${encodeURIComponent(signature)}`, { headers: { Upgrade: 'websocket' } });
    expectError(inQuery, 401, 'unauthorized');
    const other = await send('/internal/gateway/connect?gateway_id=gw-other&instance=proc-1', {
      headers: { Upgrade: 'websocket', [GATEWAY_SIGNATURE_HEADER]: signature },
    });
    expectError(other, 401, 'unauthorized');
  });
});
