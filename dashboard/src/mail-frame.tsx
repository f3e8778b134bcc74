/**
 * An HTML body in a sandboxed frame. The sanitized HTML is POSTed (a form targeting the frame, no
 * key: the body travels in the request, not the URL) to /mail-view, which answers it with its own
 * CSP: no scripts, an opaque origin, no remote content unless `remote`. A srcdoc frame would inherit
 * the dashboard's policy instead, which can neither allow the mail's inline styles nor, on request,
 * its remote images.
 */
import { useEffect, useRef, useState } from 'hono/jsx/dom';
import { callApi } from './api.ts';
import { sanitizeMail } from './sanitize.ts';
import type { Email } from './types.ts';

/** Inline parts larger than this are left out of the frame (data: URLs are held in memory). */
const MAX_INLINE_BYTES = 5 * 1024 * 1024;

async function dataUrl(blob: Blob): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result));
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });
}

/** The email's inline images that the HTML refers to, as cid → data: URL. */
async function inlineImages(email: Email): Promise<Map<string, string>> {
  const map = new Map<string, string>();
  for (const part of email.attachments) {
    if (!part.cid || part.size > MAX_INLINE_BYTES || !part.mime.startsWith('image/')) continue;
    const cid = part.cid.replace(/^<|>$/g, '');
    if (!email.body.includes(`cid:${cid}`)) continue;
    const response = await callApi('GET', `/emails/${email.id}/attachments/${part.id}`);
    map.set(cid, await dataUrl(await response.blob()));
  }
  return map;
}

let frames = 0;

export function MailFrame({ email }: { email: Email }) {
  const [remote, setRemote] = useState(false);
  const [inline, setInline] = useState<Map<string, string> | null>(null);
  const [name] = useState(() => `mail-frame-${++frames}`);
  const form = useRef<HTMLFormElement>(null);
  const field = useRef<HTMLTextAreaElement>(null);

  useEffect(() => {
    inlineImages(email).then(setInline, () => setInline(new Map()));
  }, [email.id]);
  const clean = inline ? sanitizeMail(email.body, { remote, inline }) : null;
  useEffect(() => {
    if (!clean || !form.current || !field.current) return;
    field.current.value = clean.html;
    form.current.submit();
  }, [clean?.html]);

  return (
    <div class="mail-body">
      {clean && clean.held > 0 && !remote && (
        <p class="notice">
          Remote content is blocked ({clean.held} {clean.held === 1 ? 'item' : 'items'}), so opening this email tells
          nobody you read it.{' '}
          <button type="button" onClick={() => setRemote(true)}>
            Load remote content
          </button>
        </p>
      )}
      <form ref={form} method="post" action="/mail-view" target={name} class="hidden" aria-hidden="true">
        <textarea ref={field} name="html" tabIndex={-1} />
        <input type="hidden" name="remote" value={remote ? '1' : '0'} />
      </form>
      <iframe
        name={name}
        title={`Body of "${email.subject}"`}
        sandbox="allow-popups allow-popups-to-escape-sandbox"
        referrerpolicy="no-referrer"
        class="mail-frame"
      />
    </div>
  );
}
