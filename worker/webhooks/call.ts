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

async function callHeaders(env: Env, secrets: SecretCache, row: DeliveryRow, body: string, now: number) {
  const headers = new Headers();
  for (const { key, value } of JSON.parse(row.headers_json) as EndpointHeader[]) headers.set(key, value);
  const cacheKey = `${row.endpoint_id}\n${row.endpoint_secret}`;
  let secret = secrets.get(cacheKey);
  if (!secret) {
    secret = openEndpointSecret(secretKeys(env), row.endpoint_id, row.endpoint_secret);
    secrets.set(cacheKey, secret);
  }
  for (const [key, value] of Object.entries(
    await signatureHeaders(await secret, row.event_id, body, Math.floor(now / SECOND)),
  )) {
    headers.set(key, value);
  }
  headers.set('Content-Type', 'application/json');
  return headers;
}

/** Makes the call; never throws (a failure to build it is a failed attempt too). */
export async function makeCall(
  env: Env,
  options: DeliveryOptions,
  secrets: SecretCache,
  row: DeliveryRow,
): Promise<Outcome> {
  let headers: Headers;
  let body: string;
  try {
    body = envelope(row).body;
    headers = await callHeaders(env, secrets, row, body, options.now());
  } catch (err) {
    return { ok: false, statusCode: null, error: `could not build the call: ${(err as Error).message}` };
  }
  const signal = AbortSignal.timeout(options.timeoutMs);
  try {
    // Redirects are not followed: a 3xx is a failed attempt (and cannot lead the call elsewhere).
    const response = await options.fetch(row.url, { method: 'POST', headers, body, redirect: 'manual', signal });
    await response.body?.cancel().catch(() => {}); // only the status matters
    return { ok: response.ok, statusCode: response.status, error: response.ok ? null : `HTTP ${response.status}` };
  } catch (err) {
    if (signal.aborted) return { ok: false, statusCode: null, error: `timeout after ${options.timeoutMs / SECOND} s` };
    return { ok: false, statusCode: null, error: `network error: ${(err as Error).message}` };
  }
}
