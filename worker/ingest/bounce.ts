/**
 * Bounce (non-delivery report) detection. A bounce is a report that a message could not be delivered
 * and will not be: standard DSNs (RFC 3464) are read field by field, free-text reports are recognised
 * by their structure (bounce-text.ts). Delay notices come back with action 'delayed' (a warning, no
 * email.new.bounce); read receipts, feedback-loop complaints, challenge-response requests and
 * auto-replies are not bounces at all.
 */

import type { BounceInfo, ParsedAddress, ParsedAttachment } from './types.ts';
import { addressesIn, deliveryStatus, reportType, returnedHeaders } from './bounce-dsn.ts';
import {
  guessStatus,
  isChallenge,
  isDaemon,
  mayBeBounce,
  reportHead,
  reportSection,
  textVerdict,
} from './bounce-text.ts';

export interface BounceInput {
  contentType: string;
  from: ParsedAddress | null;
  /** The message's headers, RFC 2047-decoded (X-Failed-Recipients, Auto-Submitted, To). */
  headers?: { name: string; value: string }[];
  subject: string;
  plain: string;
  attachments: ParsedAttachment[];
}

export function detectBounce(input: BounceInput): BounceInfo | null {
  const kind = reportType(input.contentType, input.attachments);
  // Read receipts and complaints are reports too, never bounces; Dovecot alone rejects mail with an MDN
  // ("automatically rejected"), so a daemon's MDN still goes to the text reading below.
  if (kind === 'feedback-report') return null;
  if (kind !== null && kind !== 'delivery-status' && !(kind === 'disposition-notification' && isDaemon(input.from)))
    return null;
  const dsn = deliveryStatus(input.attachments);
  if (dsn === 'success') return null;
  const section = reportSection(input.plain);
  const { report, copyAt } = section;
  // No report part and nothing in the text that a bounce says: the text reading below would answer null.
  if (kind === null && dsn === null && !mayBeBounce(input, reportHead(report))) return null;
  if (isChallenge(`${input.subject}\n${report.slice(0, 6000)}\n${dsn?.diagnostic ?? ''}`)) return null;
  const original = returnedHeaders(input.attachments, input.plain, copyAt);
  const header = (name: string) =>
    (input.headers ?? [])
      .filter((h) => h.name.toLowerCase() === name)
      .map((h) => h.value)
      .join(', ');

  if (dsn?.recipient) {
    return {
      original_message_id: original.messageId,
      recipient: dsn.recipient,
      status: dsn.status || guessStatus(dsn.diagnostic, dsn.action),
      action: dsn.action,
      diagnostic: dsn.diagnostic,
    };
  }
  const text = textVerdict({
    from: input.from,
    to: addressesIn(header('to')),
    subject: input.subject,
    plain: input.plain,
    failedRecipients: header('x-failed-recipients'),
    autoSubmitted: header('auto-submitted'),
    returned: original.messageId !== null || original.recipients.length > 0,
    section,
  });
  // A declared delivery-status report is a bounce even when its text alone would not say so.
  const action = text?.action ?? (kind === 'delivery-status' ? (dsn?.action ?? 'failed') : null);
  if (!action) return null;
  // Last resort: the returned message had a single recipient, so that is the one that failed.
  const recipient = text?.recipient || (original.recipients.length === 1 ? original.recipients[0]! : '');
  if (!recipient) return null;
  const diagnostic = text?.diagnostic || dsn?.diagnostic || '';
  return {
    original_message_id: original.messageId,
    recipient,
    status: dsn?.status || guessStatus(`${diagnostic}\n${text?.section ?? ''}`, action),
    action,
    diagnostic,
  };
}
