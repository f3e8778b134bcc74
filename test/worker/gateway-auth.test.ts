/**
 * The gateway's side door refuses replays: a signed call, or the control socket's signed upgrade,
 * is accepted once. A call whose signature (over its request line and declared body length and
 * hash) does not verify is refused before its body is read, and so is one over the cap; the body
 * read is checked against the declared hash and length.
 */
import { createExecutionContext } from 'cloudflare:test';
import { env, exports } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { hmacSha256, sha256Hex, toHex } from '../../common/crypto.ts';
import { GATEWAY_SIGNATURE_HEADER, signRequest } from '../../common/signing.ts';
import { createApp } from '../../worker/app.ts';
import { MAX_INTERNAL_BODY_BYTES } from '../../worker/gateways/auth.ts';
import { expectError } from './helpers.ts';
import { meteredEnv, newMeter } from './metered.ts';
import { createSyncedAccount, GATEWAY_SECRET } from './sync-helpers.ts';

const BASE = 'https://mail.example.com';
const app = createApp();

/** A body of `length` zero bytes made only when read, 1 MB at a time; `pulled` says how much was. */
function countingBody(length: number) {
  let pulled = 0;
  const chunk = new Uint8Array(1024 * 1024);
  const stream = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        const size = Math.min(chunk.byteLength, length - pulled);
        if (size <= 0) return controller.close();
        pulled += size;
        controller.enqueue(chunk.subarray(0, size));
      },
    },
    { highWaterMark: 0 },
  );
  return { stream, length, pulled: () => pulled };
}

/** A POST with `signature` and a counting body straight to the app (no copy by the runtime), metered. */
async function inProcess(path: string, signature: string, body: ReturnType<typeof countingBody>) {
  const meter = newMeter();
  const response = await app.fetch(
    new Request(`${BASE}${path}`, {
      method: 'POST',
      headers: { [GATEWAY_SIGNATURE_HEADER]: signature, 'Content-Length': String(body.length) },
      body: body.stream,
      duplex: 'half',
    } as RequestInit),
    meteredEnv(env, meter),
    createExecutionContext(),
  );
  return { answer: { status: response.status, body: await response.json(), headers: response.headers }, meter };
}

/** A valid signature for a POST to `path` declaring a body of `length` zero bytes (hashed, not sent). */
async function signFor(path: string, length: number): Promise<string> {
  const t = Math.floor(Date.now() / 1000);
  const nonce = toHex(crypto.getRandomValues(new Uint8Array(16)));
  // The MAC as common/signing.ts makes it, over a declared length the test never has to allocate.
  const sha = 'e'.repeat(64);
  const mac = toHex(await hmacSha256(GATEWAY_SECRET, `${t}\n${nonce}\nPOST\n${path}\n${length}\n${sha}`));
  return `t=${t},n=${nonce},l=${length},h=${sha},v1=${mac}`;
}

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

  it('refuses a forged signature on a 60 MB body without reading the body or querying D1', async () => {
    const body = countingBody(60 * 1024 * 1024);
    const t = Math.floor(Date.now() / 1000);
    const forged = `t=${t},n=${'a'.repeat(32)},l=${body.length},h=${'b'.repeat(64)},v1=${'c'.repeat(64)}`;
    const { answer, meter } = await inProcess('/internal/gateway/heartbeat', forged, body);
    expectError(answer, 401, 'unauthorized');
    expect(body.pulled()).toBe(0);
    expect(meter).toMatchObject({ d1: 0, subrequests: 0 });
  });

  it('refuses, before reading the body, a signed call over the cap or whose Content-Length is not the signed one', async () => {
    const path = '/internal/gateway/heartbeat';
    const overCap = countingBody(MAX_INTERNAL_BODY_BYTES + 1);
    const tooBig = await inProcess(path, await signFor(path, overCap.length), overCap);
    expectError(tooBig.answer, 413, 'payload_too_large');
    expect(overCap.pulled()).toBe(0);
    expect(tooBig.meter.d1).toBe(0);

    const body = JSON.stringify({ gateway_id: 'gw-length', instance: 'proc-1', held: [], capacity: 10 });
    const signature = await signRequest(GATEWAY_SECRET, { method: 'POST', path, body });
    const longer = countingBody(body.length + 1);
    expectError((await inProcess(path, signature, longer)).answer, 401, 'unauthorized');
    expect(longer.pulled()).toBe(0);
  });

  it('checks the streamed body against the signed hash and length', async () => {
    const path = '/internal/gateway/heartbeat';
    const body = JSON.stringify({ gateway_id: 'gw-hash', instance: 'proc-1', held: [], capacity: 10 });
    const altered = body.replace('proc-1', 'proc-2');
    const signature = await signRequest(GATEWAY_SECRET, { method: 'POST', path, body });
    const wrong = await send(path, {
      method: 'POST',
      headers: { [GATEWAY_SIGNATURE_HEADER]: signature },
      body: altered,
    });
    expectError(wrong, 401, 'unauthorized');
    // Streamed without a Content-Length, longer than declared: refused once past the declared length.
    const again = await signRequest(GATEWAY_SECRET, { method: 'POST', path, body });
    const stream = new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(`${body}    `));
        controller.close();
      },
    });
    const overlong = await send(path, {
      method: 'POST',
      headers: { [GATEWAY_SIGNATURE_HEADER]: again },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    expectError(overlong, 401, 'unauthorized');
  });
});

describe('a staged source', () => {
  it('streams into R2 when the signature declares the SHA-256 in its path, and is refused otherwise', async () => {
    const source = new TextEncoder().encode('Subject: staged\r\n\r\nbody\r\n');
    const sha = await sha256Hex(source);
    const { id: accountId } = await createSyncedAccount();
    const path = `/internal/gateway/accounts/${accountId}/sources/${sha}`;
    const put = async (signedBody: Uint8Array, target = path) =>
      send(target, {
        method: 'PUT',
        headers: {
          [GATEWAY_SIGNATURE_HEADER]: await signRequest(GATEWAY_SECRET, {
            method: 'PUT',
            path: target,
            body: signedBody,
          }),
        },
        body: source,
      });
    expect((await put(source)).status).toBe(200);
    expect(await (await env.BLOBS.get(`accounts/${accountId}/staged/${sha}.eml`))?.text()).toContain('staged');
    const other = new TextEncoder().encode('Subject: other\r\n\r\nbody\r\n');
    expectError(await put(other), 401, 'unauthorized');
    const elsewhere = `/internal/gateway/accounts/${accountId}/sources/${await sha256Hex(other)}`;
    expectError(await put(source, elsewhere), 401, 'unauthorized');

    // A removed account takes no source: it would outlive the purge.
    await env.BLOBS.delete(`accounts/${accountId}/staged/${sha}.eml`);
    await env.DB.prepare('UPDATE accounts SET removed_at_ms = ? WHERE id = ?').bind(Date.now(), accountId).run();
    expectError(await put(source), 409, 'lease_lost');
    expect(await env.BLOBS.head(`accounts/${accountId}/staged/${sha}.eml`)).toBeNull();
  });
});

describe('a very large staged source', () => {
  it('goes in signed parts and is whole once completed; a completion sent again is answered as done', async () => {
    const part = 5 * 1024 * 1024;
    const source = new Uint8Array(2 * part + 123).map((_, i) => 65 + (i % 26));
    const sha = await sha256Hex(source);
    const { id: accountId } = await createSyncedAccount();
    const base = `/internal/gateway/accounts/${accountId}/sources/${sha}/uploads`;
    const call = async (method: string, path: string, body: string | Uint8Array) =>
      send(path, {
        method,
        headers: { [GATEWAY_SIGNATURE_HEADER]: await signRequest(GATEWAY_SECRET, { method, path, body }) },
        body,
      });
    const begun = await call('POST', base, '{}');
    expect(begun.status).toBe(200);
    const { upload_id } = begun.body as { upload_id: string };
    const upload = `${base}/${encodeURIComponent(upload_id)}`;
    const parts: { part: number; etag: string }[] = [];
    for (let i = 0; i * part < source.length; i++) {
      const answer = await call('PUT', `${upload}/${i + 1}`, source.subarray(i * part, (i + 1) * part));
      expect(answer.status).toBe(200);
      parts.push({ part: i + 1, etag: (answer.body as { etag: string }).etag });
    }
    const complete = JSON.stringify({ parts });
    expect((await call('POST', `${upload}/complete`, complete)).status).toBe(200);
    const stored = await env.BLOBS.get(`accounts/${accountId}/staged/${sha}.eml`);
    expect(await sha256Hex(new Uint8Array(await stored!.arrayBuffer()))).toBe(sha);
    expect((await call('POST', `${upload}/complete`, complete)).status).toBe(200);
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
