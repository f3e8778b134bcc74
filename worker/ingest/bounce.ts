/**
 * Bounce (non-delivery report) detection. Standard DSNs (RFC 3464) are read field by field; the
 * non-standard reports of qmail, Exim, Postfix, Sendmail, Exchange, Yahoo, Gmail etc. are recognised
 * by who sent them or their subject *and* a failure phrase in the body, so ordinary mail that merely
 * talks about bounces is not flagged.
 */

import type { BounceInfo, ParsedAddress, ParsedAttachment } from './types.ts';
import { decodeBytes, firstHeader, headerEnd, messageIds, parseHeaderBlock } from './headers.ts';

export interface BounceInput {
  contentType: string;
  from: ParsedAddress | null;
  subject: string;
  plain: string;
  attachments: ParsedAttachment[];
}

const DAEMON_SENDER =
  /^(?:mailer-?daemon|mail-?daemon|postmaster|mdaemon|mail\.?delivery\.?(?:sub)?system|microsoftexchange[0-9a-f]*)(?:@|$)/i;
const DAEMON_NAME =
  /\b(?:mail delivery (?:sub)?system|mailer[- ]daemon|postmaster|mail administrator|delivery subsystem)\b/i;
const BOUNCE_SUBJECT =
  /undeliver|returned mail|delivery (?:status notification|failure|failed|has failed|notification|problem)|mail delivery failed|failure notice|non-?delivery|not (?:be )?delivered|nondeliverable|delivery report|mail system error|warning: could not send/i;
const FAILURE_PHRASE =
  /qmail-send program|could not be delivered|couldn't be delivered|permanent fatal error|(?:was|were) not delivered|delivery to the following recipients? (?:failed|has been delayed)|failed permanently|undeliverable|unable to deliver|could not deliver|did not reach|delivery has failed|user unknown|unknown user|no such (?:user|mailbox)|mailbox (?:unavailable|not found|is full|full)|recipient address rejected|wasn't able to deliver|not able to deliver|delivery failed|delivery problems?|message not delivered|could not reach|has not yet been delivered|will continue trying|over quota|unrecoverable error|invalid final delivery|exceeds allowed size|has been returned|mail delivery software|delivery failure|returning (?:message )?to sender|(?:was|been) rejected|not (?:be )?delivered/i;
const DELAY_PHRASE =
  /\(delay\)|delayed|has not yet been delivered|will (?:continue|keep) trying|still trying|warning: could not send/i;
// Where the copy of the original message starts: addresses after this are the original's, not the failed recipient.
const ORIGINAL_COPY =
  /^.*(?:below this line is a copy|original message (?:follows|headers?)|copy of (?:the |your )?(?:original )?message|returned message|headers of the original|message headers? follows?|unsent message below|^-+ ?original message ?-+).*$/im;
const ADDRESS = /[a-z0-9!#$%&'*+/=?^_`{|}~.-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]+/gi;
const STATUS = /\b([245])\.(\d{1,3})\.(\d{1,3})\b/;
const SMTP_REPLY = /\b([45])[0-5][0-9][ -]/;

export function detectBounce(input: BounceInput): BounceInfo | null {
  const report = deliveryStatus(input);
  if (report === 'success') return null;
  const isBounce = report !== null || looksLikeBounce(input);
  if (!isBounce) return null;
  const textual = report?.recipient ? null : fromText(input);
  const recipient = report?.recipient || textual?.recipient;
  if (!recipient) return null;
  const action =
    report?.action || (DELAY_PHRASE.test(`${input.subject}\n${input.plain.slice(0, 2000)}`) ? 'delayed' : 'failed');
  const diagnostic = report?.diagnostic || textual?.diagnostic || '';
  const status = report?.status || guessStatus(`${diagnostic}\n${textual?.section ?? ''}`, action);
  return { original_message_id: originalMessageId(input), recipient, status, action, diagnostic };
}

function looksLikeBounce({ from, subject, plain }: BounceInput): boolean {
  if (!FAILURE_PHRASE.test(plain.slice(0, 20000))) return false;
  const daemon = from !== null && (DAEMON_SENDER.test(from.address) || DAEMON_NAME.test(from.name));
  // A person replying about a bounce ("Re: Undelivered Mail…") is not a bounce.
  return daemon || (BOUNCE_SUBJECT.test(subject) && !/^\s*(?:re|fwd?|aw|sv|wg)\s*:/i.test(subject));
}

interface Report {
  recipient: string;
  action: string;
  status: string;
  diagnostic: string;
}

/** Reads the message/delivery-status part: null when there is none, 'success' for a delivery receipt. */
function deliveryStatus({ contentType, attachments }: BounceInput): Report | 'success' | null {
  const part = attachments.find((a) => /^message\/(?:global-)?delivery-status$/.test(a.mime));
  if (!part) {
    return /multipart\/report/i.test(contentType) && /report-type\s*=\s*"?delivery-status/i.test(contentType)
      ? { recipient: '', action: '', status: '', diagnostic: '' }
      : null;
  }
  const recipients = fieldGroups(decodeBytes(part.content)).filter(
    (g) => g.has('final-recipient') || g.has('original-recipient'),
  );
  const pick =
    recipients.find((g) => /failed/i.test(g.get('action') ?? '')) ??
    recipients.find((g) => /delayed/i.test(g.get('action') ?? '')) ??
    recipients[0];
  if (!pick) return { recipient: '', action: '', status: '', diagnostic: '' };
  const declared = (pick.get('action') ?? '').trim().toLowerCase();
  if (/^(?:delivered|relayed|expanded)\b/.test(declared)) return 'success';
  const status = STATUS.exec(pick.get('status') ?? '')?.[0] ?? '';
  // Reports in the wild also say "failure", "Failed (permanent)" or nothing at all.
  const action = /delay/.test(declared) || (!/fail/.test(declared) && status.startsWith('4')) ? 'delayed' : 'failed';
  // Original-Recipient is the address the sender wrote; Final-Recipient may be a rewritten or
  // non-Internet one (`LOCAL;<f.b>`, X.400), so it comes second unless it is the only rfc822 address.
  const candidates = ['original-recipient', 'final-recipient'].map((field) => {
    const m = /^\s*([^;]*);\s*<?([^<>]*?)>?\s*$/.exec(pick.get(field) ?? '');
    return { rfc822: /rfc822/i.test(m?.[1] ?? '') && (m?.[2] ?? '').includes('@'), address: m?.[2]?.trim() ?? '' };
  });
  return {
    recipient: (candidates.find((c) => c.rfc822) ?? candidates.find((c) => c.address))?.address ?? '',
    action,
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

/** The failed recipient and the reason, read from the human-readable report. */
function fromText({ from, plain }: BounceInput): { recipient: string; diagnostic: string; section: string } | null {
  const copy = plain.search(ORIGINAL_COPY);
  const report = plain.slice(0, copy >= 0 ? copy : 20000);
  // Prefer addresses from the line with the first failure phrase on; before it there may be the sender's.
  const phrase = report.search(FAILURE_PHRASE);
  const fromPhrase = phrase >= 0 ? report.slice(report.lastIndexOf('\n', phrase) + 1) : '';
  return recipientIn(fromPhrase, from) ?? recipientIn(report, from);
}

function recipientIn(
  section: string,
  from: ParsedAddress | null,
): { recipient: string; diagnostic: string; section: string } | null {
  const sender = from ? from.address.toLowerCase() : '';
  for (const match of section.matchAll(ADDRESS)) {
    const address = match[0].replace(/^[.'`]+|[.'`]+$/g, '').replace(/^smtp=/i, '');
    const lower = address.toLowerCase();
    if (lower === sender || /^(?:mailer-?daemon|postmaster|root)@/.test(lower)) continue;
    // "A message sent by <you@…>", "received from you@…": the sender of the original, not its recipient.
    if (/(?:sent by|from|sender)[\s:<"]*$/i.test(section.slice(Math.max(0, match.index - 30), match.index))) continue;
    const lineEnd = section.indexOf('\n\n', match.index);
    const diagnostic = section
      .slice(match.index + match[0].length, lineEnd < 0 ? match.index + 500 : Math.min(lineEnd, match.index + 500))
      .replace(/^[>:\s]+/, '')
      .replace(/\s+/g, ' ')
      .trim();
    return { recipient: address, diagnostic, section };
  }
  return null;
}

/** Best guess at an enhanced status code when the report gives none: from an SMTP reply, else x.0.0. */
function guessStatus(text: string, action: string): string {
  const enhanced = STATUS.exec(text);
  if (enhanced) return enhanced[0];
  const reply = SMTP_REPLY.exec(text);
  if (reply) return `${reply[1]}.0.0`;
  return action === 'delayed' ? '4.0.0' : '5.0.0';
}

function originalMessageId({ attachments, plain }: BounceInput): string | null {
  for (const part of attachments) {
    if (!/^(?:message\/(?:rfc822|global)|text\/rfc822-headers|message\/global-headers)$/.test(part.mime)) continue;
    const headers = parseHeaderBlock(part.content.subarray(0, headerEnd(part.content).headerLength));
    const id = messageIds(firstHeader(headers, 'Message-ID'))[0];
    if (id) return id;
  }
  // Reports that quote the original inline: its Message-ID line is in the text.
  const quoted = /^[ \t>]*message-id:\s*(<[^<>\s]+>)/im.exec(plain);
  return quoted?.[1] ?? null;
}
