/**
 * The machine-readable parts of a report: RFC 3464 delivery-status fields, the kind of multipart/report
 * (a read receipt or a complaint is a report too, never a bounce) and the returned original's headers.
 */

import type { ParsedAttachment } from './types.ts';
import { decodeBytes, firstHeader, headerEnd, messageIds, parseHeaderBlock } from './headers.ts';

export interface DsnReport {
  recipient: string;
  action: 'failed' | 'delayed';
  status: string;
  diagnostic: string;
}

export const STATUS = /\b([245])\.(\d{1,3})\.(\d{1,3})\b/;
const RETURNED = /^(?:message\/(?:rfc822|global)|text\/rfc822-headers|message\/global-headers)$/;

/** The report-type of a multipart/report, or of its parts when the top level says something else. */
export function reportType(contentType: string, attachments: ParsedAttachment[]): string | null {
  const declared = /multipart\/report/i.test(contentType)
    ? /report-type\s*=\s*"?([a-z-]+)/i.exec(contentType)?.[1]?.toLowerCase()
    : undefined;
  if (declared) return declared;
  for (const a of attachments) {
    const m = /^message\/(?:global-)?(delivery-status|disposition-notification|feedback-report)$/.exec(a.mime);
    if (m) return m[1]!;
  }
  // Some mailers declare report-type on multipart/mixed (and keep the DSN only inside a forwarded copy).
  return /report-type\s*=\s*"?delivery-status/i.test(contentType) ? 'delivery-status' : null;
}

/**
 * Reads the message/delivery-status part. null when there is none or it names no recipient, 'success' for
 * a delivery receipt (delivered, relayed, expanded).
 */
export function deliveryStatus(attachments: ParsedAttachment[]): DsnReport | 'success' | null {
  const part = attachments.find((a) => /^message\/(?:global-)?delivery-status$/.test(a.mime));
  if (!part) return null;
  const recipients = fieldGroups(decodeBytes(part.content)).filter(
    (g) => g.has('final-recipient') || g.has('original-recipient'),
  );
  const pick =
    recipients.find((g) => /fail/i.test(g.get('action') ?? '')) ??
    recipients.find((g) => STATUS.exec(g.get('status') ?? '')?.[1] === '5') ??
    recipients[0];
  if (!pick) return null;
  const declared = (pick.get('action') ?? '').trim().toLowerCase();
  if (/^(?:delivered|relayed|expanded)\b/.test(declared)) return 'success';
  const status = STATUS.exec(pick.get('status') ?? '')?.[0] ?? '';
  // Reports in the wild also say "failure", "Failed (permanent)" or nothing at all.
  const delayed = /delay/.test(declared) || (!/fail/.test(declared) && status.startsWith('4'));
  // Original-Recipient is the address the sender wrote; Final-Recipient may be a rewritten or
  // non-Internet one (`LOCAL;<f.b>`, X.400), so it comes second unless it is the only rfc822 address.
  const candidates = ['original-recipient', 'final-recipient'].map((field) => {
    const m = /^\s*([^;]*);\s*<?([^<>]*?)>?\s*$/.exec(pick.get(field) ?? '');
    return { rfc822: /rfc822/i.test(m?.[1] ?? '') && (m?.[2] ?? '').includes('@'), address: m?.[2]?.trim() ?? '' };
  });
  return {
    recipient: (candidates.find((c) => c.rfc822) ?? candidates.find((c) => c.address))?.address ?? '',
    action: delayed ? 'delayed' : 'failed',
    status,
    diagnostic: (pick.get('diagnostic-code') ?? '')
      .replace(/^[^;]*;/, '')
      .replace(/\s+/g, ' ')
      .trim(),
  };
}

/** `Name: value` groups separated by blank lines, continuation lines unfolded, names lower-cased. */
function fieldGroups(text: string): Map<string, string>[] {
  return text.split(/\r?\n(?:[ \t]*\r?\n)+/).map((block) => {
    const fields = new Map<string, string>();
    for (const line of block.replace(/\r?\n[ \t]+/g, ' ').split(/\r?\n/)) {
      const m = /^([a-z-]+)\s*:\s*(.*)$/i.exec(line);
      if (m && !fields.has(m[1]!.toLowerCase())) fields.set(m[1]!.toLowerCase(), m[2]!);
    }
    return fields;
  });
}

export interface ReturnedHeaders {
  messageId: string | null;
  /** Addresses of the returned message's To and Cc. */
  recipients: string[];
}

/** Headers of the returned original: an attached message or header block, else a copy quoted in the text. */
export function returnedHeaders(attachments: ParsedAttachment[], plain: string, copyAt: number): ReturnedHeaders {
  for (const part of attachments) {
    if (!RETURNED.test(part.mime)) continue;
    const headers = parseHeaderBlock(part.content.subarray(0, headerEnd(part.content).headerLength));
    const to = [firstHeader(headers, 'To'), firstHeader(headers, 'Cc')].filter(Boolean).join(',');
    const found = {
      messageId: messageIds(firstHeader(headers, 'Message-ID'))[0] ?? null,
      recipients: addressesIn(to),
    };
    if (found.messageId || found.recipients.length) return found;
  }
  // Reports that quote the original inline (qmail, Exim, old Sendmail): its header lines are in the text.
  const copy = copyAt >= 0 ? plain.slice(copyAt) : plain;
  const messageId = /^[ \t>]*message-id:\s*(<[^<>\s]+>)/im.exec(copy)?.[1] ?? null;
  const to = /^[ \t>]*to:[ \t]*((?:.*)(?:\r?\n[ \t]+.*)*)/im.exec(copyAt >= 0 ? copy : '')?.[1] ?? '';
  return { messageId, recipients: addressesIn(to) };
}

export const ADDRESS = /[a-z0-9!#$%&'*+/=?^_`{|}~.-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]+/gi;

export function addressesIn(text: string): string[] {
  return [...new Set((text.match(ADDRESS) ?? []).map((a) => a.replace(/^[.'`]+|[.'`]+$/g, '')))];
}
