/**
 * Signatures on every call between the gateway and the Worker, keyed with GATEWAY_SECRET.
 * Header `X-Gateway-Signature: t=<unix seconds>,n=<nonce>,l=<body length>,h=<sha256 hex of body>,
 * v1=<hex HMAC-SHA256(secret, "<t>\n<nonce>\n<METHOD>\n<path and query>\n<length>\n<sha256>")>`.
 * The body's length and hash are declared in the header and covered by the MAC, so the receiver
 * verifies the call before it reads a byte of the body, refuses a Content-Length other than the one
 * declared, and then checks the hash while the body streams in. A signature more than five minutes
 * off is refused, and each nonce is accepted once (the Worker remembers it until the signature has
 * expired), so a captured call cannot be replayed. The control WebSocket's upgrade is signed the
 * same way (a GET with an empty body). WebCrypto only, so both runtimes share it.
 */

import { constantTimeEqual, hmacSha256, sha256Hex, toHex } from './crypto.ts';

export const GATEWAY_SIGNATURE_HEADER = 'X-Gateway-Signature';
export const MAX_CLOCK_SKEW_SECONDS = 300;

const HEADER = /^t=(\d{1,12}),n=([0-9a-f]{32}),l=(\d{1,12}),h=([0-9a-f]{64}),v1=([0-9a-f]{64})$/;

/** A call as signed: its request line and its body's length and SHA-256 (hex). */
interface SignedCall {
  method: string;
  /** The path with its query string, if any. */
  path: string;
  length: number;
  sha256: string;
}

function mac(secret: string, call: SignedCall, t: number, nonce: string): Promise<Uint8Array> {
  const canonical = `${t}\n${nonce}\n${call.method.toUpperCase()}\n${call.path}\n${call.length}\n${call.sha256}`;
  return hmacSha256(secret, canonical);
}

const byteLength = (body: string | Uint8Array): number =>
  typeof body === 'string' ? new TextEncoder().encode(body).byteLength : body.byteLength;

export async function signRequest(
  secret: string,
  request: { method: string; path: string; body: string | Uint8Array },
  now: number = Date.now(),
): Promise<string> {
  const t = Math.floor(now / 1000);
  const nonce = toHex(crypto.getRandomValues(new Uint8Array(16)));
  const call = { ...request, length: byteLength(request.body), sha256: await sha256Hex(request.body) };
  return `t=${t},n=${nonce},l=${call.length},h=${call.sha256},v1=${toHex(await mac(secret, call, t, nonce))}`;
}

export interface SignatureHeader {
  t: number;
  nonce: string;
  /** The body's declared length in bytes and SHA-256 (hex): what the body must turn out to be. */
  length: number;
  sha256: string;
  mac: string;
  /** Until when (ms) the signature is valid: its nonce must be remembered that long. */
  expiresMs: number;
}

/** The header's parts when it is well formed and within the clock skew, else null. Checks no MAC. */
export function parseSignature(header: string | null | undefined, now: number = Date.now()): SignatureHeader | null {
  const parsed = signatureParts(header);
  return parsed && Math.abs(now / 1000 - parsed.t) <= MAX_CLOCK_SKEW_SECONDS ? parsed : null;
}

/** The header's parts when it is well formed, whatever its time (for a signature already verified). */
export function signatureParts(header: string | null | undefined): SignatureHeader | null {
  const match = header ? HEADER.exec(header.trim()) : null;
  if (!match) return null;
  const t = Number(match[1]);
  return {
    t,
    nonce: match[2]!,
    length: Number(match[3]),
    sha256: match[4]!,
    mac: match[5]!,
    expiresMs: (t + MAX_CLOCK_SKEW_SECONDS) * 1000,
  };
}

/**
 * The verified signature of a call's request line and declared body (its nonce still to be checked
 * against replays, and its body against the declared length and hash, by the caller), or null when
 * it is missing, malformed, expired or wrong. Reads no body.
 */
export async function verifySignature(
  secret: string,
  header: string | null | undefined,
  request: { method: string; path: string },
  now: number = Date.now(),
): Promise<SignatureHeader | null> {
  const parsed = parseSignature(header, now);
  if (!parsed || !secret) return null;
  const expected = toHex(
    await mac(secret, { ...request, length: parsed.length, sha256: parsed.sha256 }, parsed.t, parsed.nonce),
  );
  return (await constantTimeEqual(expected, parsed.mac)) ? parsed : null;
}

/** `verifySignature`, and the body (already read) is the one declared. */
export async function verifyRequest(
  secret: string,
  header: string | null | undefined,
  request: { method: string; path: string; body: string | Uint8Array },
  now: number = Date.now(),
): Promise<SignatureHeader | null> {
  const signature = await verifySignature(secret, header, request, now);
  if (!signature) return null;
  const matches = byteLength(request.body) === signature.length && (await sha256Hex(request.body)) === signature.sha256;
  return matches ? signature : null;
}
