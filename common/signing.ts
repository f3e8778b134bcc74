/**
 * Signatures on every call between the gateway and the Worker, keyed with GATEWAY_SECRET.
 * Header `X-Gateway-Signature: t=<unix seconds>,n=<nonce>,v1=<hex HMAC-SHA256(secret,
 * "<t>\n<nonce>\n<METHOD>\n<path and query>\n<sha256 hex of body>")>`. A signature more than five
 * minutes off is refused, and each nonce is accepted once (the Worker remembers it until the
 * signature has expired), so a captured call cannot be replayed. The control WebSocket's upgrade is
 * signed the same way (a GET with an empty body). WebCrypto only, so both runtimes share it.
 */

import { constantTimeEqual, hmacSha256, sha256Hex, toHex } from './crypto.ts';

export const GATEWAY_SIGNATURE_HEADER = 'X-Gateway-Signature';
export const MAX_CLOCK_SKEW_SECONDS = 300;

const HEADER = /^t=(\d{1,12}),n=([0-9a-f]{32}),v1=([0-9a-f]{64})$/;

interface Signed {
  method: string;
  /** The path with its query string, if any. */
  path: string;
  /** The body, or its SHA-256 (hex) where the verifier must not read it first (a large upload, checked by R2). */
  body: string | Uint8Array | { sha256: string };
}

const bodyDigest = (body: Signed['body']): Promise<string> | string =>
  typeof body === 'string' || body instanceof Uint8Array ? sha256Hex(body) : body.sha256;

async function mac(secret: string, request: Signed, t: number, nonce: string): Promise<string> {
  const canonical = `${t}\n${nonce}\n${request.method.toUpperCase()}\n${request.path}\n${await bodyDigest(request.body)}`;
  return toHex(await hmacSha256(secret, canonical));
}

export async function signRequest(secret: string, request: Signed, now: number = Date.now()): Promise<string> {
  const t = Math.floor(now / 1000);
  const nonce = toHex(crypto.getRandomValues(new Uint8Array(16)));
  return `t=${t},n=${nonce},v1=${await mac(secret, request, t, nonce)}`;
}

export interface SignatureHeader {
  t: number;
  nonce: string;
  mac: string;
  /** Until when (ms) the signature is valid: its nonce must be remembered that long. */
  expiresMs: number;
}

/** The header's parts when it is well formed and within the clock skew, else null. Checks no MAC. */
export function parseSignature(header: string | null | undefined, now: number = Date.now()): SignatureHeader | null {
  const match = header ? HEADER.exec(header.trim()) : null;
  if (!match) return null;
  const t = Number(match[1]);
  if (Math.abs(now / 1000 - t) > MAX_CLOCK_SKEW_SECONDS) return null;
  return { t, nonce: match[2]!, mac: match[3]!, expiresMs: (t + MAX_CLOCK_SKEW_SECONDS) * 1000 };
}

/**
 * The verified signature (its nonce still to be checked against replays by the caller), or null
 * when it is missing, malformed, expired or wrong.
 */
export async function verifyRequest(
  secret: string,
  header: string | null | undefined,
  request: Signed,
  now: number = Date.now(),
): Promise<SignatureHeader | null> {
  const parsed = parseSignature(header, now);
  if (!parsed || !secret) return null;
  return (await constantTimeEqual(await mac(secret, request, parsed.t, parsed.nonce), parsed.mac)) ? parsed : null;
}
