/**
 * Endpoint secrets and the signatures on every webhook call (DECISIONS.md, "Webhook calls" and
 * "Finer points"):
 * - `X-Email-Engine-Signature: t=<unix s>,v1=<hex HMAC-SHA256(secret as UTF-8, "<t>.<body>")>`
 * - Standard Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64 HMAC-SHA256(
 *   base64-decoded part after "whsec_", "<id>.<timestamp>.<body>")>`, so its libraries verify unchanged.
 */
import { decryptSecret, encryptSecret, fromBase64, type SecretKeys, toBase64 } from '../lib/crypto.ts';
import { hmacSha256, toHex } from '../../common/crypto.ts';

const SECRET_PREFIX = 'whsec_';

/** A new endpoint secret: `whsec_` + base64 of 32 random bytes (a valid Standard Webhooks secret). */
export function newEndpointSecret(): string {
  return SECRET_PREFIX + toBase64(crypto.getRandomValues(new Uint8Array(32)));
}

/** Secrets are stored AES-GCM encrypted, bound to their endpoint's id. */
export const secretContext = (endpointId: string) => `webhook-secret:${endpointId}`;

export const sealEndpointSecret = (keys: SecretKeys, endpointId: string, secret: string): Promise<string> =>
  encryptSecret(keys, secret, secretContext(endpointId));

export const openEndpointSecret = (keys: SecretKeys, endpointId: string, sealed: string): Promise<string> =>
  decryptSecret(keys, sealed, secretContext(endpointId));

/** The signature headers of one call; `timestamp` is in unix seconds. */
export async function signatureHeaders(
  secret: string,
  eventId: string,
  body: string,
  timestamp: number,
): Promise<Record<string, string>> {
  const t = String(timestamp);
  const [engine, standard] = await Promise.all([
    hmacSha256(secret, `${t}.${body}`),
    hmacSha256(fromBase64(secret.slice(SECRET_PREFIX.length)), `${eventId}.${t}.${body}`),
  ]);
  return {
    'X-Email-Engine-Signature': `t=${t},v1=${toHex(engine)}`,
    'webhook-id': eventId,
    'webhook-timestamp': t,
    'webhook-signature': `v1,${toBase64(standard)}`,
  };
}
