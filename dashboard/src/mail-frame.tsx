/**
 * An HTML body in a sandboxed frame. The HTML is POSTed (a form targeting the frame: the body travels
 * in the request, never in a URL, and no key is needed) to /mail-view, which makes it inert and
 * answers it with its own CSP: no scripts, an opaque origin, no remote content unless asked. A srcdoc
 * frame would inherit the dashboard's policy instead, which can neither allow the mail's inline
 * styles nor, on request, its remote images. Inline (cid:) images are fetched here with the key and
 * sent along as data: URLs.
 */
import { useEffect, useRef, useState } from 'hono/jsx/dom';
import { callApi } from './api.ts';
import type { Email } from './types.ts';

/** Inline parts larger than this are left out of the frame (data: URLs travel in the form). */
const MAX_INLINE_BYTES = 2 * 1024 * 1024;

async function dataUrl(blob: Blob): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result));
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });
}

/** The email's inline images that its HTML refers to, as {cid: data URL}. */
async function inlineImages(email: Email): Promise<Record<string, string>> {
  const map: Record<string, string> = {};
  for (const part of email.attachments) {
    if (!part.cid || part.size > MAX_INLINE_BYTES || !part.mime.startsWith('image/')) continue;
    const cid = part.cid.replace(/^<|>$/g, '');
    if (!email.body.includes(`cid:${cid}`)) continue;
    const response = await callApi('GET', `/emails/${email.id}/attachments/${part.id}`);
    map[cid] = await dataUrl(await response.blob());
  }
  return map;
}

/** How many remote resources /mail-view holds back in this HTML. */
async function countRemote(html: string): Promise<number> {
  const form = new FormData();
  form.set('mode', 'count');
  form.set('html', html);
  const response = await fetch('/mail-view', { method: 'POST', body: form, credentials: 'omit' });
  return response.ok ? ((await response.json()) as { held: number }).held : 0;
}

let frames = 0;

export function MailFrame({ email }: { email: Email }) {
  const [remote, setRemote] = useState(false);
  const [inline, setInline] = useState<Record<string, string> | null>(null);
  const [held, setHeld] = useState(0);
  const [name] = useState(() => `mail-frame-${++frames}`);
  const form = useRef<HTMLFormElement>(null);
  const field = useRef<HTMLTextAreaElement>(null);

  useEffect(() => {
    inlineImages(email).then(setInline, () => setInline({}));
    countRemote(email.body).then(setHeld, () => setHeld(0));
  }, [email.id]);
  useEffect(() => {
    if (!inline || !form.current || !field.current) return;
    field.current.value = email.body;
    form.current.submit();
  }, [inline, remote]);

  return (
    <div class="mail-body">
      {held > 0 && !remote && (
        <p class="notice">
          Remote content is blocked ({held} {held === 1 ? 'item' : 'items'}), so opening this email tells nobody you
          read it.{' '}
          <button type="button" onClick={() => setRemote(true)}>
            Load remote content
          </button>
        </p>
      )}
      <form ref={form} method="post" action="/mail-view" target={name} class="hidden" aria-hidden="true">
        <textarea ref={field} name="html" tabIndex={-1} />
        <input type="hidden" name="remote" value={remote ? '1' : '0'} />
        <input type="hidden" name="inline" value={JSON.stringify(inline ?? {})} />
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
