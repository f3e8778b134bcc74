/**
 * HTML mail made inert for the dashboard's mail frame (HTMLRewriter, streaming). Dropped: active and
 * embedding elements, event handler attributes, script URLs, and, unless the person asked for remote
 * content, every remote resource (image sources, CSS url()s, @imports). `cid:` images become the
 * data: URLs the dashboard fetched with its key. The frame's own CSP (mail-view.ts) is the second
 * wall; this pass is what keeps the frame's console quiet and counts what was held back.
 *
 * Done here rather than in the dashboard: parsing mail in the page, even with DOMParser, has Chrome
 * check every inline style and handler against the dashboard's CSP and report each one as an error.
 */
const DROPPED = [
  'script',
  'noscript',
  'iframe',
  'frame',
  'frameset',
  'object',
  'embed',
  'applet',
  'link',
  'meta',
  'base',
  'form',
  'input',
  'button',
  'select',
  'textarea',
  'audio',
  'video',
  'source',
  'track',
  'portal',
  'template',
].join(', ');
/** Attributes whose URL is fetched as the page loads (href too, off links: SVG <image>, <use>). */
const RESOURCE_ATTRIBUTES = new Set(['src', 'background', 'poster', 'lowsrc', 'dynsrc', 'xlink:href', 'href']);
const LINK_ELEMENTS = new Set(['a', 'area']);

export interface SanitizeOptions {
  /** Load images and fonts from other origins (the person asked). */
  remote: boolean;
  /** Content-ID (without angle brackets) → data: URL of the inline part. */
  inline: Record<string, string>;
}

const isRemote = (url: string) => /^(https?:)?\/\//i.test(url);

/** What a URL that loads becomes: kept, replaced (cid:), or null to drop it. */
function resource(url: string, options: SanitizeOptions, held: { count: number }): string | null {
  const value = url.trim();
  if (/^cid:/i.test(value)) return options.inline[value.slice(4).replace(/^<|>$/g, '')] ?? null;
  if (/^data:image\//i.test(value)) return value;
  if (isRemote(value)) {
    if (options.remote && /^https?:/i.test(value)) return value;
    held.count++;
    return null;
  }
  return null; // relative, file:, javascript:, …: nothing to load in the frame
}

function cleanCss(css: string, options: SanitizeOptions, held: { count: number }): string {
  return css
    .replace(/@import[^;]*;?/gi, () => {
      held.count++;
      return '';
    })
    .replace(/url\(\s*(['"]?)(.*?)\1\s*\)/gi, (_all, _quote, url: string) => {
      const kept = resource(url, options, held);
      return kept ? `url("${kept.replace(/["\\\n]/g, '')}")` : 'none';
    });
}

function cleanElement(el: Element, options: SanitizeOptions, held: { count: number }): void {
  const tag = el.tagName.toLowerCase();
  for (const [rawName, value = ''] of [...el.attributes]) {
    const name = (rawName ?? '').toLowerCase();
    if (!name) continue;
    if (name.startsWith('on') || name === 'formaction' || name === 'action' || name === 'ping') {
      el.removeAttribute(name);
    } else if (name === 'style') {
      el.setAttribute(name, cleanCss(value, options, held));
    } else if (name === 'href' && LINK_ELEMENTS.has(tag)) {
      if (!/^(https?:|mailto:|tel:|#)/i.test(value.trim())) el.removeAttribute(name);
    } else if (name === 'srcset') {
      // Kept only when every candidate may load as written.
      const urls = value.split(',').map((part) => part.trim().split(/\s+/)[0] ?? '');
      if (!urls.every((url) => resource(url, options, held) === url)) el.removeAttribute(name);
    } else if (RESOURCE_ATTRIBUTES.has(name)) {
      const kept = resource(value, options, held);
      if (kept === null) el.removeAttribute(name);
      else el.setAttribute(name, kept);
    }
  }
  if (LINK_ELEMENTS.has(tag) && el.hasAttribute('href')) {
    el.setAttribute('target', '_blank');
    el.setAttribute('rel', 'noopener noreferrer');
  }
}

/** The email's HTML made inert, as a stream, and (once consumed) how many remote resources were held back. */
export function sanitizeMail(
  html: string,
  options: SanitizeOptions,
): { body: ReadableStream; held: { count: number } } {
  const held = { count: 0 };
  let css = '';
  const rewriter = new HTMLRewriter()
    .on(DROPPED, {
      element(el) {
        el.remove();
      },
    })
    .on('*', {
      element(el) {
        if (!el.removed) cleanElement(el, options, held);
      },
    })
    .on('style', {
      // A style's text may come in chunks: gather it, then write it back cleaned.
      text(chunk) {
        css += chunk.text;
        if (!chunk.lastInTextNode) {
          chunk.remove();
          return;
        }
        chunk.replace(cleanCss(css, options, held), { html: true });
        css = '';
      },
    });
  const response = rewriter.transform(new Response(html, { headers: { 'Content-Type': 'text/html; charset=utf-8' } }));
  return { body: response.body!, held };
}

/** How many remote resources the HTML would load (what `remote` unlocks). */
export async function countRemote(html: string): Promise<number> {
  const { body, held } = sanitizeMail(html, { remote: false, inline: {} });
  await new Response(body).arrayBuffer();
  return held.count;
}
