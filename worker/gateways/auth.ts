/**
 * Authenticating the gateway's calls to /internal/gateway (common/signing.ts). The middleware
 * verifies the signature over the request line and the declared body length and SHA-256, refuses a
 * Content-Length other than the declared one or over the cap, and accepts the nonce once, all before
 * a byte of the body is read; a route then reads the body through `readSignedBody`, which stops at
 * the declared length and checks the hash as the bytes stream in.
 */
import type { Context, MiddlewareHandler } from 'hono';
import { GATEWAY_SIGNATURE_HEADER, signatureParts, verifySignature } from '../../common/signing.ts';
import { toHex } from '../../common/crypto.ts';
import type { AppEnv } from '../env.ts';
import { ApiError, errorResponse } from '../lib/errors.ts';

/** The largest gateway call: a change batch with one big message (base64 of a 30 MB source and more). */
export const MAX_INTERNAL_BODY_BYTES = 64 * 1024 * 1024;

const REFUSED = 'The gateway signature is missing, wrong, expired or already used.';
const BODY_MISMATCH = 'The body is not the one the gateway signature declares.';

/** Remembers the nonce until its signature expires; false when it was seen before (a replay). */
async function firstUse(db: D1Database, nonce: string, expiresMs: number): Promise<boolean> {
  const result = await db
    .prepare('INSERT INTO gateway_nonces (nonce, expires_ms) VALUES (?, ?) ON CONFLICT (nonce) DO NOTHING')
    .bind(nonce, expiresMs)
    .run();
  return result.meta.changes === 1;
}

/** Every /internal/* call: 401/413 unless signed, within the cap, and new; nothing of the body is read. */
export const requireGatewaySignature: MiddlewareHandler<AppEnv> = async (c, next) => {
  const url = new URL(c.req.url);
  const signature = await verifySignature(c.env.GATEWAY_SECRET, c.req.header(GATEWAY_SIGNATURE_HEADER), {
    method: c.req.method,
    path: url.pathname + url.search,
  });
  if (!signature) return errorResponse('unauthorized', REFUSED);
  if (signature.length > MAX_INTERNAL_BODY_BYTES)
    return errorResponse('payload_too_large', 'The gateway call is larger than allowed.');
  const contentLength = c.req.header('content-length');
  if (contentLength !== undefined && Number(contentLength) !== signature.length)
    return errorResponse('unauthorized', BODY_MISMATCH);
  if (!(await firstUse(c.env.DB, signature.nonce, signature.expiresMs))) return errorResponse('unauthorized', REFUSED);
  await next();
};

/** The declared SHA-256 of the body of a call the middleware let through. */
export function signedSha256(c: Context<AppEnv>): string {
  const signature = signatureParts(c.req.header(GATEWAY_SIGNATURE_HEADER));
  if (!signature) throw new ApiError('unauthorized', REFUSED);
  return signature.sha256;
}

/**
 * The body of a call the middleware let through, read up to its declared length with its SHA-256
 * computed as it streams; 401 when it is longer, shorter or other than declared.
 */
export async function readSignedBody(c: Context<AppEnv>): Promise<Uint8Array> {
  const signature = signatureParts(c.req.header(GATEWAY_SIGNATURE_HEADER));
  if (!signature) throw new ApiError('unauthorized', REFUSED);
  const bytes = new Uint8Array(signature.length);
  const digest = new crypto.DigestStream('SHA-256');
  const hashing = digest.getWriter();
  let received = 0;
  const reader = c.req.raw.body?.getReader();
  for (let chunk = await reader?.read(); reader && chunk && !chunk.done; chunk = await reader.read()) {
    if (received + chunk.value.byteLength > signature.length) {
      await reader.cancel();
      throw new ApiError('unauthorized', BODY_MISMATCH);
    }
    bytes.set(chunk.value, received);
    received += chunk.value.byteLength;
    await hashing.write(chunk.value);
  }
  await hashing.close();
  if (received !== signature.length || toHex(await digest.digest) !== signature.sha256)
    throw new ApiError('unauthorized', BODY_MISMATCH);
  return bytes;
}
