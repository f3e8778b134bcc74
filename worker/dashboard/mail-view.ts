/**
 * POST /mail-view: the dashboard's mail frame. The dashboard (dashboard/src/mail-frame.tsx) posts an
 * email's HTML here with a form targeting a sandboxed iframe, and gets it back made inert
 * (sanitize.ts) as a document with its own policy: a sandbox (opaque origin, no scripts, no forms),
 * nothing loaded but inline styles and data: images, and remote images and fonts only when the person
 * asked (`remote=1`). With `mode=count` (a fetch) it answers how many remote resources are held back.
 * No API key is involved: the HTML comes with the request, so this shows nothing the caller did not
 * send. Only the dashboard's own pages are answered (Sec-Fetch-Site), so another site cannot use it
 * to show its content under this origin.
 */
import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { AppEnv } from '../env.ts';
import { errorResponse } from '../lib/errors.ts';
import { limitPerAddress } from '../lib/rate-limits.ts';
import { countRemote, sanitizeMail } from './sanitize.ts';

/**
 * An email's HTML body with the inline images it shows (as data: URLs) fits; the frame is for
 * reading, not for transfers, and it needs no key, so it takes no more.
 */
export const MAX_FRAME_BYTES = 8 * 1024 * 1024;

export function mailViewPolicy(remote: boolean): string {
  const remoteSources = remote ? ' https: http:' : '';
  return [
    'sandbox allow-popups allow-popups-to-escape-sandbox',
    "default-src 'none'",
    "style-src 'unsafe-inline'",
    `img-src data:${remoteSources}`,
    `font-src data:${remoteSources}`,
    "form-action 'none'",
    "base-uri 'none'",
    "frame-ancestors 'self'",
  ].join('; ');
}

export const mailView = new Hono<AppEnv>().post(
  '/',
  limitPerAddress((env) => env.MAIL_VIEW_RATE_LIMIT, 'Too many mail frames from this address.'),
  bodyLimit({
    maxSize: MAX_FRAME_BYTES,
    onError: () => errorResponse('payload_too_large', 'The email body is larger than the mail frame takes.'),
  }),
  async (c) => {
    if (c.req.header('Sec-Fetch-Site') !== 'same-origin')
      return errorResponse('not_found', 'The mail frame is only shown inside the dashboard.');
    const form = await c.req.parseBody();
    const html = typeof form.html === 'string' ? form.html : '';
    if (form.mode === 'count') return c.json({ held: await countRemote(html) });
    const remote = form.remote === '1';
    const { body } = sanitizeMail(html, { remote, inline: parseInline(form.inline) });
    return c.body(body, 200, {
      'Content-Type': 'text/html; charset=utf-8',
      'Content-Security-Policy': mailViewPolicy(remote),
      'Cache-Control': 'no-store',
      'Referrer-Policy': 'no-referrer',
      'X-Content-Type-Options': 'nosniff',
    });
  },
);

/** `inline`: JSON of {cid: data URL}; anything else counts as none. */
function parseInline(value: unknown): Record<string, string> {
  try {
    const parsed: unknown = typeof value === 'string' ? JSON.parse(value) : null;
    if (!parsed || typeof parsed !== 'object') return {};
    return Object.fromEntries(
      Object.entries(parsed).filter(
        (entry): entry is [string, string] => typeof entry[1] === 'string' && entry[1].startsWith('data:image/'),
      ),
    );
  } catch {
    return {};
  }
}
