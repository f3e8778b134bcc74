/**
 * HTML mail made inert before it is shown. DOMParser builds a document that runs nothing and loads
 * nothing; from it we drop active and embedding elements, event handler attributes and script URLs,
 * and (unless the person asked for remote content) every remote resource: image sources, CSS url()s,
 * @imports. `cid:` images become the data: URLs given. The mail frame's own CSP (worker/dashboard/
 * mail-view.ts) is the second wall; this pass is what keeps its console quiet and counts what was held back.
 */
const DROPPED =
  'script, noscript, iframe, frame, frameset, object, embed, applet, link, meta, base, form, input, button, select, ' +
  'textarea, audio, video, source, track, portal, template';
/** Attributes whose URL is fetched as the page loads (href only off links: SVG <image>, <use>). */
const RESOURCE_ATTRIBUTES = new Set(['src', 'background', 'poster', 'lowsrc', 'dynsrc', 'xlink:href']);
const LINK_ELEMENTS = new Set(['A', 'AREA']);

export interface SanitizeOptions {
  /** Load images and fonts from other origins (the person asked). */
  remote: boolean;
  /** Content-ID (without angle brackets) → data: URL of the inline part. */
  inline: Map<string, string>;
}

const isRemote = (url: string) => /^(https?:)?\/\//i.test(url);

/** What a fetched URL becomes: kept, replaced (cid:), or null to drop it. */
function resource(url: string, options: SanitizeOptions, held: { count: number }): string | null {
  const value = url.trim();
  if (/^cid:/i.test(value)) return options.inline.get(value.slice(4).replace(/^<|>$/g, '')) ?? null;
  if (/^data:image\//i.test(value)) return value;
  if (isRemote(value)) {
    if (options.remote && /^https?:/i.test(value)) return value;
    held.count++;
    return null;
  }
  return null; // relative, file:, javascript:, …: nothing to load here
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
  for (const attr of [...el.attributes]) {
    const name = attr.name.toLowerCase();
    if (name.startsWith('on') || name === 'formaction' || name === 'action' || name === 'ping') {
      el.removeAttribute(attr.name);
    } else if (name === 'style') {
      el.setAttribute('style', cleanCss(attr.value, options, held));
    } else if (name === 'href' && LINK_ELEMENTS.has(el.tagName)) {
      if (!/^(https?:|mailto:|tel:|#)/i.test(attr.value.trim())) el.removeAttribute(attr.name);
    } else if (name === 'srcset') {
      // Kept only when every candidate may load as written.
      const urls = attr.value.split(',').map((part) => part.trim().split(/\s+/)[0] ?? '');
      if (!urls.every((url) => resource(url, options, held) === url)) el.removeAttribute(attr.name);
    } else if (RESOURCE_ATTRIBUTES.has(name) || name === 'href') {
      const kept = resource(attr.value, options, held);
      if (kept === null) el.removeAttribute(attr.name);
      else el.setAttribute(attr.name, kept);
    }
  }
  if (LINK_ELEMENTS.has(el.tagName) && el.hasAttribute('href')) {
    el.setAttribute('target', '_blank');
    el.setAttribute('rel', 'noopener noreferrer');
  }
}

/** The email's HTML as an inert document, and how many remote resources were held back. */
export function sanitizeMail(html: string, options: SanitizeOptions): { html: string; held: number } {
  const doc = new DOMParser().parseFromString(html, 'text/html');
  const held = { count: 0 };
  for (const el of doc.querySelectorAll(DROPPED)) el.remove();
  for (const el of doc.querySelectorAll('*')) cleanElement(el, options, held);
  for (const style of doc.querySelectorAll('style'))
    style.textContent = cleanCss(style.textContent ?? '', options, held);
  const charset = doc.createElement('meta');
  charset.setAttribute('charset', 'utf-8');
  doc.head.prepend(charset);
  return { html: `<!doctype html>${doc.documentElement.outerHTML}`, held: held.count };
}
