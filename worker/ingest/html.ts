/** Conversions between the text and HTML bodies. Linear-time string scanning: bodies can be many MB. */

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

/** A text body as HTML that renders the same: escaped, with its line breaks and spacing kept. */
export function textToHtml(text: string): string {
  return text ? `<div style="white-space:pre-wrap">${escapeHtml(text)}</div>` : '';
}

const NAMED_ENTITIES: Record<string, string> = {
  amp: '&',
  lt: '<',
  gt: '>',
  quot: '"',
  apos: "'",
  nbsp: ' ',
  shy: '',
  zwnj: '',
  zwj: '',
  copy: '©',
  reg: '®',
  trade: '™',
  hellip: '…',
  mdash: '—',
  ndash: '–',
  bull: '•',
  middot: '·',
  lsquo: '‘',
  rsquo: '’',
  sbquo: '‚',
  ldquo: '“',
  rdquo: '”',
  bdquo: '„',
  laquo: '«',
  raquo: '»',
  euro: '€',
  pound: '£',
  yen: '¥',
  cent: '¢',
  sect: '§',
  para: '¶',
  deg: '°',
  times: '×',
  divide: '÷',
  auml: 'ä',
  ouml: 'ö',
  uuml: 'ü',
  Auml: 'Ä',
  Ouml: 'Ö',
  Uuml: 'Ü',
  szlig: 'ß',
  eacute: 'é',
  egrave: 'è',
  ecirc: 'ê',
  aacute: 'á',
  agrave: 'à',
  acirc: 'â',
  ccedil: 'ç',
  oacute: 'ó',
  iacute: 'í',
  uacute: 'ú',
  ntilde: 'ñ',
  Eacute: 'É',
  aring: 'å',
  Aring: 'Å',
  oslash: 'ø',
  Oslash: 'Ø',
  aelig: 'æ',
  AElig: 'Æ',
};

export function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-f]{1,6}|#\d{1,7}|[a-z][a-z0-9]{1,7});/gi, (match, entity: string) => {
    if (entity[0] !== '#') return NAMED_ENTITIES[entity] ?? NAMED_ENTITIES[entity.toLowerCase()] ?? match;
    const code = entity[1] === 'x' || entity[1] === 'X' ? parseInt(entity.slice(2), 16) : parseInt(entity.slice(1), 10);
    if (code === 0 || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return '\ufffd';
    return String.fromCodePoint(code);
  });
}

/** Removes `<tag …>…</tag>` blocks; an unclosed block runs to the end (as a browser would treat it). */
function dropBlocks(html: string, tag: string): string {
  const lower = html.toLowerCase();
  let out = '';
  let pos = 0;
  for (;;) {
    const start = lower.indexOf(`<${tag}`, pos);
    if (start < 0) return out + html.slice(pos);
    out += html.slice(pos, start);
    if (/[a-z0-9-]/.test(lower[start + tag.length + 1] ?? '')) {
      // `<header>` is not `<head>`
      out += html[start];
      pos = start + 1;
      continue;
    }
    const close = lower.indexOf(`</${tag}`, start);
    if (close < 0) return out;
    const end = lower.indexOf('>', close);
    if (end < 0) return out;
    pos = end + 1;
  }
}

const BLOCK_BREAK = /<\/?(?:p|div|tr|table|h[1-6]|ul|ol|blockquote|pre|section|article|header|footer|hr)\b[^>]*>/gi;

/** The readable text of an HTML body: scripts/styles/comments dropped, blocks and <br> become line breaks. */
export function htmlToText(html: string): string {
  let text = dropComments(html);
  for (const tag of ['head', 'script', 'style', 'title']) text = dropBlocks(text, tag);
  // Tag patterns can only fail after the last '>', so replacing up to it keeps regexes linear.
  const end = text.lastIndexOf('>') + 1;
  text =
    text
      .slice(0, end)
      .replace(/\s+/g, ' ')
      .replace(/<br\b[^>]*>/gi, '\n')
      .replace(/<li\b[^>]*>/gi, '\n• ')
      .replace(BLOCK_BREAK, '\n')
      .replace(/<\/t[dh]\s*>/gi, '\t')
      .replace(/<[^>]*>/g, '') + text.slice(end).replace(/\s+/g, ' ');
  return decodeEntities(text)
    .replace(/[ \t\u00a0]+/g, ' ')
    .replace(/ ?\n ?/g, '\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

function dropComments(html: string): string {
  let out = '';
  let pos = 0;
  for (;;) {
    const start = html.indexOf('<!--', pos);
    if (start < 0) return out + html.slice(pos);
    out += html.slice(pos, start);
    const end = html.indexOf('-->', start + 4);
    if (end < 0) return out;
    pos = end + 3;
  }
}

/** About `max` characters of text with whitespace collapsed, cut at a code point boundary. */
export function snippetOf(text: string, max = 200): string {
  // Only as much of the text as the snippet needs is flattened (a body can be many MB): a prefix
  // whose flattened form is longer than `max + 1` starts exactly as the whole text's does.
  let end = max * 2;
  let flat: string;
  for (;;) {
    flat = text.slice(0, end).replace(/\s+/g, ' ').trimStart();
    if (end >= text.length) {
      flat = flat.trimEnd();
      break;
    }
    if (flat.length > max + 1) break;
    end *= 4;
  }
  if (flat.length <= max) return flat;
  const cut = /[\ud800-\udbff]$/.test(flat.slice(0, max)) ? max - 1 : max;
  return flat.slice(0, cut).trimEnd();
}
