/**
 * RFC 822 message parsing for sync: raw source in, everything the Email resource needs out.
 * Pure and workerd-compatible. Never throws on bad input: whatever postal-mime cannot parse is
 * still returned with its headers (read here, independently of postal-mime) and its body as text.
 */

import PostalMime, { addressParser } from 'postal-mime';
import type { Attachment, Email } from 'postal-mime';
import { toHex } from '../../common/crypto.ts';
import { detectBounce } from './bounce.ts';
import {
  allHeaders,
  decodeBytes,
  decodeHeaderValue,
  firstHeader,
  headerEnd,
  messageIds,
  normalizeLineEndings,
  parseDate,
  parseHeaderBlock,
  presentedHeaders,
} from './headers.ts';
import type { RawHeader } from './headers.ts';
import { htmlToText, snippetOf, textToHtml } from './html.ts';
import type { ParsedAddress, ParsedAttachment, ParsedMessage } from './types.ts';

export function normalizeAddress(address: string): string {
  return address.trim().toLowerCase();
}

export async function parseMessage(raw: Uint8Array | ArrayBuffer): Promise<ParsedMessage> {
  const bytes = normalizeLineEndings(raw instanceof Uint8Array ? raw : new Uint8Array(raw));
  const { headerLength, bodyStart } = headerEnd(bytes);
  const rawHeaders = parseHeaderBlock(bytes.subarray(0, headerLength));
  const mime = await parseMime(bytes);

  const htmlBody = (mime?.html ?? '').trimEnd();
  const textBody = (mime ? (mime.text ?? '') : decodeBytes(bytes.subarray(bodyStart))).trimEnd();
  const plain = textBody || htmlToText(htmlBody);
  const attachments = (mime?.attachments ?? []).map(toAttachment);

  const message: Omit<ParsedMessage, 'fingerprint' | 'bounce'> = {
    message_id: messageIds(firstHeader(rawHeaders, 'Message-ID'))[0] ?? null,
    in_reply_to: messageIds(firstHeader(rawHeaders, 'In-Reply-To'))[0] ?? null,
    references: messageIds(allHeaders(rawHeaders, 'References').join(' ')),
    subject: decodeHeaderValue(firstHeader(rawHeaders, 'Subject') ?? '').trim(),
    date_ms: parseDate(firstHeader(rawHeaders, 'Date')),
    from: addresses(rawHeaders, 'From')[0] ?? null,
    to: addresses(rawHeaders, 'To'),
    cc: addresses(rawHeaders, 'Cc'),
    bcc: addresses(rawHeaders, 'Bcc'),
    reply_to: addresses(rawHeaders, 'Reply-To'),
    html: htmlBody || textToHtml(textBody),
    plain,
    snippet: snippetOf(plain),
    headers: presentedHeaders(rawHeaders),
    header_length: headerLength,
    attachments,
    has_attachments: attachments.length > 0,
  };
  return {
    ...message,
    fingerprint: await fingerprint(message),
    bounce: detectBounce({
      contentType: firstHeader(rawHeaders, 'Content-Type') ?? '',
      from: message.from,
      headers: message.headers,
      subject: message.subject,
      plain,
      attachments,
    }),
  };
}

async function parseMime(bytes: Uint8Array): Promise<Email | null> {
  try {
    // message/rfc822 parts without a disposition (forwards, bounces) stay attachments instead of
    // being merged into the body, so a bounce keeps the original message apart from its report.
    return await PostalMime.parse(bytes, { rfc822Attachments: true, attachmentEncoding: 'arraybuffer' });
  } catch {
    return null;
  }
}

function addresses(headers: RawHeader[], name: string): ParsedAddress[] {
  const values = allHeaders(headers, name);
  if (!values.length) return [];
  let parsed: ReturnType<typeof addressParser>;
  try {
    parsed = addressParser(values.join(', '), { flatten: true });
  } catch {
    return [];
  }
  return parsed.flatMap((a) => (a.address ? [{ address: a.address.trim(), name: (a.name ?? '').trim() }] : []));
}

const encoder = new TextEncoder();

function toAttachment(attachment: Attachment): ParsedAttachment {
  const { content } = attachment;
  const bytes =
    typeof content === 'string'
      ? encoder.encode(content)
      : content instanceof Uint8Array
        ? content
        : new Uint8Array(content);
  const declared = (attachment.mimeType ?? '').trim().toLowerCase();
  const mime = /^[^/\s]+\/[^/\s]+$/.test(declared) ? declared : 'application/octet-stream';
  // Some mailers send full client paths ("C:\Docs\a.pdf"); only the last segment is a name.
  const filename = (attachment.filename ?? '').split(/[\\/]/).pop()!.trim() || defaultFilename(mime);
  const dot = filename.lastIndexOf('.');
  const cid = attachment.contentId?.trim().replace(/^<|>$/g, '').trim() || null;
  return {
    filename,
    extension: dot > 0 && dot < filename.length - 1 ? filename.slice(dot + 1).toLowerCase() : '',
    mime,
    content: bytes,
    size: bytes.byteLength,
    cid,
    inline: attachment.disposition === 'inline' || attachment.related === true,
  };
}

const DEFAULT_EXTENSIONS: Record<string, string> = {
  'message/rfc822': 'eml',
  'message/global': 'eml',
  'text/rfc822-headers': 'txt',
  'message/delivery-status': 'txt',
  'text/plain': 'txt',
  'text/html': 'html',
  'text/calendar': 'ics',
  'image/jpeg': 'jpg',
  'image/svg+xml': 'svg',
  'application/ms-tnef': 'dat',
  'application/octet-stream': 'bin',
};

/** A name for a part that has none, so the API never shows an empty name. */
function defaultFilename(mime: string): string {
  const [type, subtype = ''] = mime.split('/');
  const base = mime.startsWith('message/') ? 'message' : type === 'image' ? 'image' : 'attachment';
  const extension = DEFAULT_EXTENSIONS[mime] ?? (/^[a-z0-9]{1,5}$/.test(subtype) ? subtype : 'bin');
  return `${base}.${extension}`;
}

/**
 * Identity for mail without a usable Message-ID. Built only from what the sender wrote (never from
 * trace headers that each server or folder copy adds), with the body normalised for whitespace.
 */
async function fingerprint(message: Omit<ParsedMessage, 'fingerprint' | 'bounce'>): Promise<string> {
  const list = (items: ParsedAddress[]) =>
    items
      .map((a) => normalizeAddress(a.address))
      .sort()
      .join(',');
  const material = JSON.stringify([
    'v1',
    message.date_ms,
    message.from ? normalizeAddress(message.from.address) : '',
    list(message.to),
    list(message.cc),
    message.subject,
    message.plain.replace(/\s+/g, ' ').trim(),
    message.attachments.map((a) => `${a.filename}:${a.size}`),
  ]);
  return toHex(await crypto.subtle.digest('SHA-256', encoder.encode(material)));
}
