/**
 * Signatures on every call between the gateway and the Worker, keyed with GATEWAY_SECRET.
 * Header `X-Gateway-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>\n<METHOD>\n<path>\n<sha256 hex of body>")>`.
 * A signature older or newer than five minutes is refused. WebCrypto only, so both runtimes share it.
 */

import { constantTimeEqual, hmacSha256, sha256Hex, toHex } from './crypto.ts';

export const GATEWAY_SIGNATURE_HEADER = 'X-Gateway-Signature';
export const MAX_CLOCK_SKEW_SECONDS = 300;

const hmacHex = async (secret: string, message: string): Promise<string> => toHex(await hmacSha256(secret, message));

const bodyDigest = (body: string | Uint8Array): Promise<string> => sha256Hex(body);

async function canonical(method: string, path: string, body: string | Uint8Array, t: number): Promise<string> {
  return `${t}\n${method.toUpperCase()}\n${path}\n${await bodyDigest(body)}`;
}

export async function signRequest(
  secret: string,
  request: { method: string; path: string; body: string | Uint8Array },
  now: number = Date.now(),
): Promise<string> {
  const t = Math.floor(now / 1000);
  return `t=${t},v1=${await hmacHex(secret, await canonical(request.method, request.path, request.body, t))}`;
}

export async function verifyRequest(
  secret: string,
  header: string | null | undefined,
  request: { method: string; path: string; body: string | Uint8Array },
  now: number = Date.now(),
): Promise<boolean> {
  if (!header || !secret) return false;
  const match = /^t=(\d{1,12}),v1=([0-9a-f]{64})$/.exec(header.trim());
  if (!match) return false;
  const t = Number(match[1]);
  if (Math.abs(now / 1000 - t) > MAX_CLOCK_SKEW_SECONDS) return false;
  const expected = await hmacHex(secret, await canonical(request.method, request.path, request.body, t));
  return constantTimeEqual(expected, match[2]!);
}

/** Query parameters that authenticate the gateway's WebSocket (browsers' WebSocket API cannot set headers). */
export async function signConnect(
  secret: string,
  gatewayId: string,
  now: number = Date.now(),
): Promise<{ t: string; sig: string }> {
  const t = String(Math.floor(now / 1000));
  return { t, sig: await hmacHex(secret, `CONNECT ${gatewayId} ${t}`) };
}

export async function verifyConnect(
  secret: string,
  gatewayId: string,
  t: string | null | undefined,
  sig: string | null | undefined,
  now: number = Date.now(),
): Promise<boolean> {
  if (!secret || !t || !sig || !/^\d{1,12}$/.test(t) || !/^[0-9a-f]{64}$/.test(sig)) return false;
  if (Math.abs(now / 1000 - Number(t)) > MAX_CLOCK_SKEW_SECONDS) return false;
  return constantTimeEqual(await hmacHex(secret, `CONNECT ${gatewayId} ${t}`), sig);
}
