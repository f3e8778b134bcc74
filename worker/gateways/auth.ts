/**
 * Authenticating the gateway's calls to /internal/gateway: the signature (common/signing.ts) and its
 * nonce, accepted once. Calls without a well-formed, current signature are refused before their
 * body is read, and bodies are capped while they stream (app.ts).
 */
import type { Context, MiddlewareHandler } from 'hono';
import { GATEWAY_SIGNATURE_HEADER, parseSignature, verifyRequest } from '../../common/signing.ts';
import type { AppEnv } from '../env.ts';
import { ApiError, errorResponse } from '../lib/errors.ts';

/** The largest gateway call: a change batch with one big message (base64 of a 30 MB source and more). */
export const MAX_INTERNAL_BODY_BYTES = 64 * 1024 * 1024;

const REFUSED = 'The gateway signature is missing, wrong, expired or already used.';

/** Cheap refusal before anything is read: no signature, a malformed one, or one outside the clock skew. */
export const requireSignatureHeader: MiddlewareHandler<AppEnv> = async (c, next) => {
  if (!parseSignature(c.req.header(GATEWAY_SIGNATURE_HEADER))) return errorResponse('unauthorized', REFUSED);
  await next();
};

/** Remembers the nonce until its signature expires; false when it was seen before (a replay). */
async function firstUse(db: D1Database, nonce: string, expiresMs: number): Promise<boolean> {
  const result = await db
    .prepare('INSERT INTO gateway_nonces (nonce, expires_ms) VALUES (?, ?) ON CONFLICT (nonce) DO NOTHING')
    .bind(nonce, expiresMs)
    .run();
  return result.meta.changes === 1;
}

/** 401 unless the call carries a valid signature over `body` whose nonce is new. */
export async function verifyGatewayCall(
  c: Context<AppEnv>,
  body: string | Uint8Array | { sha256: string },
): Promise<void> {
  const url = new URL(c.req.url);
  const signature = await verifyRequest(c.env.GATEWAY_SECRET, c.req.header(GATEWAY_SIGNATURE_HEADER), {
    method: c.req.method,
    path: url.pathname + url.search,
    body,
  });
  if (!signature || !(await firstUse(c.env.DB, signature.nonce, signature.expiresMs)))
    throw new ApiError('unauthorized', REFUSED);
}
