/**
 * Open and click tracking: signed links and the HTML rewrite that puts them into a message.
 *
 * Links live outside /api/v1 (no API key): `/t/open/{trk}?s=…` (a 1×1 GIF) and
 * `/t/click/{trk}?u=<url>&s=…` (a redirect). `s` is base64url HMAC-SHA256 over the link's
 * purpose, tracking id and URL, keyed with a key derived from CREDENTIALS_KEY, so a link cannot be
 * pointed anywhere else (no open redirect) and ids cannot be guessed.
 */
import type { Env } from '../env.ts';
import { decodeEntities } from '../ingest/html.ts';
import { fromBase64, secretKeys, toBase64Url } from '../lib/crypto.ts';
import { constantTimeEqual, hmacSha256 } from '../../common/crypto.ts';

const DERIVATION_LABEL = 'mailbox-edge tracking links v1';

export const trackingPaths = {
  open: (trackingId: string) => `/t/open/${trackingId}`,
  click: (trackingId: string) => `/t/click/${trackingId}`,
};

const keys = new Map<string, Promise<Uint8Array>>();

function trackingKey(credentialsKey: string): Promise<Uint8Array> {
  let key = keys.get(credentialsKey);
  if (!key) {
    key = hmacSha256(fromBase64(credentialsKey), DERIVATION_LABEL);
    keys.set(credentialsKey, key);
  }
  return key;
}

async function signature(
  credentialsKey: string,
  purpose: 'open' | 'click',
  trackingId: string,
  url = '',
): Promise<string> {
  return toBase64Url(await hmacSha256(await trackingKey(credentialsKey), `${purpose}\n${trackingId}\n${url}`));
}

/** Links in mail sent before a key rotation stay valid while CREDENTIALS_KEY_PREVIOUS is set. */
export async function verifyTrackingSignature(
  env: Env,
  purpose: 'open' | 'click',
  trackingId: string,
  url: string,
  given: string | undefined,
): Promise<boolean> {
  if (!given) return false;
  const { current, previous } = secretKeys(env);
  for (const key of previous ? [current, previous] : [current])
    if (await constantTimeEqual(await signature(key, purpose, trackingId, url), given)) return true;
  return false;
}

export async function openUrl(env: Env, base: string, trackingId: string): Promise<string> {
  return `${base}${trackingPaths.open(trackingId)}?s=${await signature(env.CREDENTIALS_KEY, 'open', trackingId)}`;
}

export async function clickUrl(env: Env, base: string, trackingId: string, target: string): Promise<string> {
  const query = new URLSearchParams({
    u: target,
    s: await signature(env.CREDENTIALS_KEY, 'click', trackingId, target),
  });
  return `${base}${trackingPaths.click(trackingId)}?${query}`;
}

/** The public origin links point at: PUBLIC_URL when set, else the origin of the request being served. */
export function publicBase(env: Env, requestUrl: string): string {
  return (env.PUBLIC_URL?.trim() || new URL(requestUrl).origin).replace(/\/+$/, '');
}

/** Rewrites http(s) links through the click redirect and/or appends the open pixel. */
export async function applyTracking(
  env: Env,
  html: string,
  options: { base: string; trackingId: string; opens: boolean; clicks: boolean },
): Promise<string> {
  const { base, trackingId } = options;
  let out = html;
  if (options.clicks) {
    // HTMLRewriter handlers cannot wait for a signature: collect the links, sign them, then rewrite.
    const hrefs = new Set<string>();
    await new HTMLRewriter()
      .on('a[href]', { element: (el) => void hrefs.add(el.getAttribute('href')?.trim() ?? '') })
      .transform(new Response(out))
      .text();
    const signed = new Map<string, string>();
    for (const href of hrefs) {
      // The attribute as written; the link's target is its decoded value. `&` is written escaped.
      const target = decodeEntities(href);
      if (/^https?:\/\//i.test(target))
        signed.set(href, (await clickUrl(env, base, trackingId, target)).replace(/&/g, '&amp;'));
    }
    out = await new HTMLRewriter()
      .on('a[href]', {
        element(element) {
          const url = signed.get(element.getAttribute('href')?.trim() ?? '');
          if (url) element.setAttribute('href', url);
        },
      })
      .transform(new Response(out))
      .text();
  }
  if (options.opens) {
    const pixel = `<img src="${await openUrl(env, base, trackingId)}" width="1" height="1" alt="" style="display:none;border:0">`;
    const at = out.search(/<\/body\s*>/i);
    out = at >= 0 ? `${out.slice(0, at)}${pixel}${out.slice(at)}` : `${out}${pixel}`;
  }
  return out;
}
