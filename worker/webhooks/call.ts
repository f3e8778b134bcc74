/**
 * One webhook call on the wire: the signed POST of the Event envelope and its outcome. The timeout
 * starts with the fetch, and callers keep at most MAX_CALLS_IN_FLIGHT calls running, so it measures
 * the subscriber and not a wait for a free connection.
 */
import { secretKeys } from '../lib/crypto.ts';
import type { Env } from '../env.ts';
import { type DeliveryRow, envelope } from './conversations.ts';
import type { EndpointHeader } from './endpoints.ts';
import { type DeliveryOptions, SECOND } from './schedule.ts';
import { openEndpointSecret, signatureHeaders } from './signing.ts';

export interface Outcome {
  ok: boolean;
  statusCode: number | null;
  error: string | null;
}

/** Opened endpoint secrets, per consumer invocation (one AES-GCM decryption per endpoint, not per call). */
export type SecretCache = Map<string, Promise<string>>;

async function signedHeaders(env: Env, secrets: SecretCache, row: DeliveryRow, body: string, now: number) {
  const cacheKey = `${row.endpoint_id}\n${row.endpoint_secret}`;
  let secret = secrets.get(cacheKey);
  if (!secret) {
    secret = openEndpointSecret(secretKeys(env), row.endpoint_id, row.endpoint_secret);
    secrets.set(cacheKey, secret);
  }
  return signatureHeaders(await secret, row.event_id, body, Math.floor(now / SECOND));
}

/** The endpoint's own headers, then the signature and content type (which they cannot replace). */
function callHeaders(endpointHeaders: string, signed: Record<string, string>): Headers {
  const headers = new Headers();
  for (const { key, value } of JSON.parse(endpointHeaders) as EndpointHeader[]) headers.set(key, value);
  for (const [key, value] of Object.entries(signed)) headers.set(key, value);
  headers.set('Content-Type', 'application/json');
  return headers;
}

/**
 * Makes the call; never throws (a failure to build it is a failed attempt too). `current` reads the
 * endpoint as it is at the last moment before the call (its URL and headers are taken from there);
 * null from it means the endpoint no longer wants the call: none is made, and null is returned.
 */
export async function makeCall(
  env: Env,
  options: DeliveryOptions,
  secrets: SecretCache,
  row: DeliveryRow,
  current: () => Promise<{ url: string; headers_json: string } | null>,
): Promise<Outcome | null> {
  let headers: Headers;
  let body: string;
  let endpoint: { url: string; headers_json: string } | null;
  try {
    body = envelope(row).body;
    const signed = await signedHeaders(env, secrets, row, body, options.now());
    endpoint = await current();
    if (!endpoint) return null;
    headers = callHeaders(endpoint.headers_json, signed);
  } catch (err) {
    return { ok: false, statusCode: null, error: `could not build the call: ${(err as Error).message}` };
  }
  const signal = AbortSignal.timeout(options.timeoutMs);
  try {
    // Redirects are not followed: a 3xx is a failed attempt (and cannot lead the call elsewhere).
    const response = await options.fetch(endpoint.url, { method: 'POST', headers, body, redirect: 'manual', signal });
    await response.body?.cancel().catch(() => {}); // only the status matters
    return { ok: response.ok, statusCode: response.status, error: response.ok ? null : `HTTP ${response.status}` };
  } catch (err) {
    if (signal.aborted) return { ok: false, statusCode: null, error: `timeout after ${options.timeoutMs / SECOND} s` };
    return { ok: false, statusCode: null, error: `network error: ${(err as Error).message}` };
  }
}
