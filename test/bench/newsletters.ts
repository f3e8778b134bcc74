/**
 * A deterministic set of newsletter-like messages for the capacity bench: each is multipart/alternative
 * with a text part and an HTML part laid out in tables with inline styles (as mailing tools make them),
 * under a real header block taken from the corpus (Received, DKIM, List-* …). The text is the
 * corpus's own prose (runs of its messages' text lines), so the bodies compress and index like real
 * mail, not like a repeated phrase nor like random words.
 */
import { readFileSync } from 'node:fs';
import { prng } from '../shared/prng.ts';

const TEXT_BYTES = 6_100;
const HTML_BYTES = 17_300;

/** Lines of prose in the corpus's bodies: mostly letters and spaces, not headers, not encoded data. */
function proseLines(files: string[]): string[] {
  const lines: string[] = [];
  for (const f of files) {
    const text = readFileSync(f, 'latin1');
    const body = text.slice(Math.max(text.search(/\r?\n\r?\n/), 0));
    for (const line of body.split(/\r?\n/)) {
      const l = line.trim();
      if (
        l.length >= 30 &&
        l.length <= 200 &&
        / \S+ \S+ /.test(l) &&
        (l.match(/[A-Za-z ]/g)?.length ?? 0) > l.length * 0.85
      )
        lines.push(l);
    }
  }
  return lines;
}

/** The header block of a corpus message, without the lines this set sets itself. */
function headerBlock(bytes: string): string[] {
  const end = bytes.search(/\r?\n\r?\n/);
  const lines = bytes.slice(0, Math.max(end, 0)).split(/\r?\n/);
  // A newsletter answers nothing: the block's own threading headers go too.
  const own =
    /^(message-id|in-reply-to|references|subject|date|to|from|content-type|content-transfer-encoding|mime-version):/i;
  const out: string[] = [];
  let skipping = false;
  for (const line of lines) {
    if (/^[ \t]/.test(line)) {
      if (!skipping) out.push(line);
      continue;
    }
    skipping = own.test(line);
    if (!skipping) out.push(line);
  }
  return out;
}

const STYLES = [
  'font-family:Helvetica,Arial,sans-serif;font-size:16px;line-height:24px;color:#333333;',
  'padding:12px 24px 12px 24px;background-color:#ffffff;border-bottom:1px solid #e5e5e5;',
  'font-family:Georgia,serif;font-size:22px;line-height:28px;color:#111111;font-weight:bold;',
  'display:inline-block;padding:10px 18px;background-color:#1a73e8;color:#ffffff;text-decoration:none;border-radius:4px;',
  'font-size:12px;line-height:18px;color:#888888;text-align:center;',
];

export function newsletterSet(corpusFiles: string[], count: number, seed = 28): Buffer[] {
  const random = prng(seed);
  const prose = proseLines(corpusFiles);
  /** `n` words of consecutive prose from a random place. */
  const sentence = (n: number) => {
    const words: string[] = [];
    for (let at = Math.floor(random() * prose.length); words.length < n; at = (at + 1) % prose.length)
      words.push(...prose[at]!.split(/\s+/));
    return words.slice(0, n).join(' ');
  };
  // Header blocks of corpus messages that have a long one (real mail through real servers).
  const headers = corpusFiles
    .map((f) => headerBlock(readFileSync(f, 'latin1')))
    .filter((h) => h.length >= 12)
    .slice(0, 50);

  return Array.from({ length: count }, (_, i) => {
    const sender = `news${i % 20}@list${i % 7}.example.test`;
    const paragraphs: string[] = [];
    while (paragraphs.join('\n\n').length < TEXT_BYTES) paragraphs.push(sentence(25 + Math.floor(random() * 40)));
    const text = paragraphs.join('\n\n').slice(0, TEXT_BYTES);
    const rows: string[] = [];
    let html = '';
    for (let p = 0; html.length < HTML_BYTES; p++) {
      const para = paragraphs[p % paragraphs.length]!;
      const style = STYLES[p % STYLES.length]!;
      rows.push(
        `<tr><td style="${style}" align="left" valign="top"><table role="presentation" width="100%" cellpadding="0" cellspacing="0" border="0"><tr><td style="${STYLES[(p + 1) % STYLES.length]}">${
          p % 4 === 0
            ? `<a href="https://list${i % 7}.example.test/r/${i}/${p}?utm_source=newsletter&amp;utm_medium=email" style="${STYLES[3]}">${sentence(4)}</a>`
            : para.slice(0, 500)
        }</td></tr></table></td></tr>`,
      );
      html = `<!DOCTYPE html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"></head><body style="margin:0;padding:0;background-color:#f4f4f4;"><table role="presentation" width="100%" cellpadding="0" cellspacing="0" border="0" style="background-color:#f4f4f4;"><tr><td align="center"><table role="presentation" width="600" cellpadding="0" cellspacing="0" border="0" style="max-width:600px;">\n${rows.join('\n')}\n</table></td></tr></table></body></html>`;
    }
    const boundary = `b${i}x${Math.floor(random() * 1e9)}`;
    const date = new Date(Date.UTC(2026, 0, 1) + i * 3_600_000).toUTCString();
    return Buffer.from(
      [
        ...headers[i % headers.length]!,
        `From: ${sentence(2)} <${sender}>`,
        'To: reader@example.test',
        `Subject: ${sentence(6)}`,
        `Date: ${date}`,
        `Message-ID: <newsletter-${i}@list${i % 7}.example.test>`,
        'MIME-Version: 1.0',
        `Content-Type: multipart/alternative; boundary="${boundary}"`,
        '',
        `--${boundary}`,
        'Content-Type: text/plain; charset=utf-8',
        'Content-Transfer-Encoding: 8bit',
        '',
        text,
        `--${boundary}`,
        'Content-Type: text/html; charset=utf-8',
        'Content-Transfer-Encoding: 8bit',
        '',
        html,
        `--${boundary}--`,
        '',
      ].join('\r\n'),
      'latin1',
    );
  });
}
