/**
 * Free-text delivery failure reports (qmail, Exim, older Postfix and Sendmail, Yahoo, AOL, Sina, list
 * managers, notices written by hand). They are recognised by structure, each a signal on its own:
 * a delivery-system sender, a failure subject, a failed-recipient block, an SMTP reply or enhanced
 * status code, and the original message or its headers returned below the report.
 */

import type { ParsedAddress } from './types.ts';
import { ADDRESS, STATUS } from './bounce-dsn.ts';

const DAEMON_SENDER =
  /^(?:mailer-?daemon|mail-?daemon|postmaster|mdaemon|mail\.?delivery\.?(?:sub)?system|microsoftexchange[0-9a-f]*|ndr|bounces?|mail\.?admin|smtp\.?gateway)(?:[@+.-]|$)/i;
const DAEMON_NAME =
  /\b(?:mail ?delivery (?:sub)?system|mailer[- ]daemon|postmaster|mail administrator|delivery subsystem|mail system|mail server|lsmtp|mail ?gateway)\b/i;
const BOUNCE_SUBJECT =
  /undeliver|returned mail|delivery (?:status notification|failure|failed|has failed|notification|problem|error)|(?:mail|message) delivery (?:failed|failure)|failure notice|non-?delivery|not (?:be )?delivered|could not be sent|nondeliverable|delivery report|mail (?:system )?error|failed mail|mail failed|rejected mail|delivery status|permanent (?:delivery )?(?:failure|error)|returning message to sender|unzustellbar|non remis|onbestelbaar/i;
const REPLY_SUBJECT = /^\s*(?:re|fwd?|aw|sv|wg|vs|antw)\s*:/i;
const FAILURE_PHRASE =
  /qmail-send program|could not be delivered|couldn't be delivered|cannot be delivered|can't be delivered|permanent(?:ly)? (?:fatal )?(?:error|failure|failed)|fatal (?:delivery )?errors?|(?:was|were|has not been|have not been) (?:not )?delivered|delivery to the following recipients? failed|failed permanently|undeliverable|unable to deliver|could not deliver|did not reach|delivery has failed|user unknown|unknown (?:user|recipient|address)|no such (?:user|mailbox|address|recipient|domain)|no mailbox|not a valid (?:user|recipient|address|mailbox)|mailbox (?:unavailable|not found|is full|full|disabled)|(?:recipient )?address rejected|wasn't able to deliver|not able to deliver|delivery failed|message not delivered|could not reach|over ?quota|quota exceeded|unrecoverable error|invalid (?:final delivery|recipient|address)|exceeds (?:allowed|the maximum)|has been returned|returning (?:message )?to sender|(?:was|been|were) rejected|not (?:be )?delivered|did not exactly match|not accepting mail|following addresses? failed|too many hops|is not a (?:known|valid) user|account (?:has been )?(?:disabled|closed|expired|suspended)|does not exist|doesn't exist|not listed in|host unknown|unknown host|relay(?:ing)? (?:denied|not permitted)|delivery (?:error|failure)|not known|was aborted|could not find a gateway|automatically rejected/i;
const DELAY_PHRASE =
  /\(delay\)|delayed|has not yet been delivered|not yet been delivered|will (?:continue|keep) trying|still (?:trying|being retried|undelivered)|warning: could not send|warning message only|do not need to resend|will be retried|attempts will continue|will continue to (?:be made|try|attempt)|temporar(?:y|ily) (?:failure|error|unable|deferred)/i;
const PERMANENT = /permanent|fatal|given up|giving up|gave up|returning (?:message )?to sender/i;
const CHALLENGE =
  /guest list|waitlist|not pre-?approved|(?:requires?|awaiting|pending|needs?) (?:your )?(?:confirmation|verification|approval of the sender)|(?:confirm|verify) (?:your|this) (?:message|e-?mail|identity)|confirm (?:the|this) (?:sender|(?:mail )?server)|verification (?:required|process)|to release your message|challenge[- ]response|prove (?:that )?you are (?:a )?(?:human|not a (?:spammer|robot))|anti-spam system .{0,40}not (?:been )?recogni[sz]ed|(?:whitelist|white list)\.|add yourself to (?:my|the) /i;
const AUTO_REPLY =
  /\b(?:out of (?:the )?office|on (?:vacation|holiday|leave|annual leave)|away from (?:the|my) (?:office|desk)|automatic reply|auto(?:matic)?[- ]?(?:reply|response|antwort)|abwesenheit|i am (?:currently )?away|i'm away|absent until|return(?:ing)? on|will be back)/i;
// Where the copy of the original message starts: addresses after this are the original's, not the failed recipient.
export const ORIGINAL_COPY =
  /(?:below this line is a copy|original message (?:follows|headers?|as received)|(?:this is )?a copy of the (?:original )?message|returned message|headers of (?:the|your) original|message headers? follows?|unsent message below|header of the source mail|enclosed are the headers|original message header|^-+ ?original message ?-+|^-+ ?(?:returned|undelivered) (?:mail|message))/im;
const SMTP_REPLY = /(?:^|[\s:("'])([45])[0-5][0-9](?:[ -]|$)/m;
const BLOCK_LINE =
  /^[ \t>*•-]*(?:rcpt to:|to:|recipient:|address:|error-for:)?[ \t]*\[?(?:smtp:)?<?([^<>\s"(),:;]+@[^<>\s"(),:;]+?)>?[.:,]?(?:[ \t]|$)/;
const BLOCK_INTRO =
  /(?:following (?:address(?:\(?es\)?)?|recipients?|users?|destinations?)|address(?:\(?es\)?)? (?:failed|below)|recipients?[\s:]*$|did not receive|could not be delivered to|not delivered to|failed recipients?|undeliverable to|addressed to|sent to|mail to|message to|delivery to)/i;

export interface TextVerdict {
  /** null when this is no bounce. */
  action: 'failed' | 'delayed' | null;
  recipient: string;
  diagnostic: string;
  section: string;
}

export interface TextInput {
  from: ParsedAddress | null;
  to: string[];
  subject: string;
  plain: string;
  failedRecipients: string;
  autoSubmitted: string;
  /** The original message came back attached (message/rfc822 or its headers). */
  returned: boolean;
  /** `reportSection(plain)`, when the caller has it already. */
  section?: { report: string; copyAt: number };
}

/** The report text: before the copy of the original. */
export function reportSection(plain: string): { report: string; copyAt: number } {
  const copyAt = plain.search(ORIGINAL_COPY);
  return { report: plain.slice(0, copyAt >= 0 ? copyAt : 20000), copyAt };
}

export function isDaemon(from: ParsedAddress | null): boolean {
  if (from === null || from.address === '' || !from.address.includes('@')) return true;
  return DAEMON_SENDER.test(from.address) || DAEMON_NAME.test(from.name);
}

export function isChallenge(text: string): boolean {
  return CHALLENGE.test(text);
}

/** The start of the report that its phrases are looked for in. */
export const reportHead = (report: string): string => report.slice(0, 6000);

/** Who sent it: a mail system, or a sender whose subject says it is a failure report. */
function fromMailSystem(input: Pick<TextInput, 'from' | 'subject'>): boolean {
  const daemon = isDaemon(input.from);
  return daemon || (BOUNCE_SUBJECT.test(input.subject) && (daemon || !REPLY_SUBJECT.test(input.subject)));
}

/**
 * Whether a text can be a bounce at all (textVerdict answers null otherwise): it comes from a mail
 * system, says so in its subject, or names a failure in its report's head.
 */
export function mayBeBounce(input: Pick<TextInput, 'from' | 'subject'>, head: string): boolean {
  return fromMailSystem(input) || FAILURE_PHRASE.test(head);
}

export function textVerdict(input: TextInput): TextVerdict | null {
  const { report, copyAt } = input.section ?? reportSection(input.plain);
  const head = reportHead(report);
  const who = fromMailSystem(input);
  const phrase = FAILURE_PHRASE.test(head);
  // Neither a mail system nor a failure phrase: no bounce, whatever else the text holds (see below).
  if (!who && !phrase) return null;
  const code = SMTP_REPLY.test(head) || STATUS.test(head) || /\(#[45]\.\d\.\d\)/.test(head);
  const returned = input.returned || copyAt >= 0;
  const failed = recipientFrom(input, report);
  const block = failed !== null && failed.fromBlock;
  // At least two independent signs, one of them that it comes from a mail system or says so in its subject.
  const signs = [phrase, code, block || input.failedRecipients !== '', returned].filter(Boolean).length;
  const told = phrase || code || block || input.failedRecipients !== '';
  if (!(who && told) && !(signs >= 3 && phrase)) return null;
  // A person's or a robot's answer: out of office, vacation, auto-reply, with no failure report in it.
  // (Auto-Submitted: auto-replied alone says nothing: RFC 3834 asks bounces to carry it too.)
  const autoReply = /vacation/i.test(input.autoSubmitted) || AUTO_REPLY.test(`${input.subject}\n${head.slice(0, 600)}`);
  if (autoReply && !(block && (code || phrase)) && !input.failedRecipients) return null;
  if (isChallenge(`${input.subject}\n${head}`)) return null;
  const delayed =
    DELAY_PHRASE.test(`${input.subject}\n${head.slice(0, 3000)}`) && !PERMANENT.test(`${input.subject}\n${head}`);
  const recipient = failed?.recipient ?? '';
  return { action: delayed ? 'delayed' : 'failed', recipient, diagnostic: failed?.diagnostic ?? '', section: report };
}

interface Found {
  recipient: string;
  diagnostic: string;
  fromBlock: boolean;
}

/** The failed recipient: X-Failed-Recipients, else a recipient block line, else an address the report names. */
function recipientFrom(input: TextInput, report: string): Found | null {
  const ours = new Set([input.from?.address ?? '', ...input.to].map((a) => a.toLowerCase()));
  const usable = (a: string) => {
    const lower = a.toLowerCase();
    return !ours.has(lower) && !/^(?:mailer-?daemon|postmaster|root|mdaemon)@/.test(lower) && !lower.includes('..');
  };
  const header = (input.failedRecipients.match(ADDRESS) ?? []).find(usable);
  if (header)
    return { recipient: header, diagnostic: diagnosticAfter(report, report.indexOf(header), header), fromBlock: true };

  const lines = report.split(/\r?\n/);
  let introAt = -1;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (BLOCK_INTRO.test(line)) introAt = i;
    const m = BLOCK_LINE.exec(line);
    // A block line is an address at the start of a line, alone or followed by its reason, within a few
    // lines of a phrase that announces the failed recipients (or shaped like `<address>:` itself).
    if (m && usable(clean(m[1]!)) && (/^[ \t>]*<[^>]+>:/.test(line) || (introAt >= 0 && i - introAt <= 6))) {
      const address = clean(m[1]!);
      return { recipient: address, diagnostic: diagnosticAfter(report, report.indexOf(m[1]!), m[1]!), fromBlock: true };
    }
  }
  const domain = /@([^@\s>]+)$/.exec(input.from?.address ?? '')?.[1];
  const local = /(?:following recipients?|address\(?es\)?)[^\n]*\n[ \t]+([a-z0-9._-]+)[ \t]*(?:\n|$)/i.exec(report);
  if (local && domain) return { recipient: `${local[1]}@${domain.toLowerCase()}`, diagnostic: '', fromBlock: true };
  // "(generated from x@y)": Exim names the address the sender wrote when it expanded to a hidden one.
  const generated = /generated from\s+<?([^\s<>()]+@[^\s<>()]+)>?/i.exec(report);
  if (generated && usable(clean(generated[1]!)))
    return { recipient: clean(generated[1]!), diagnostic: '', fromBlock: true };

  // Prefer addresses from the first failure phrase on; before it there may be the sender's.
  const phrase = report.search(FAILURE_PHRASE);
  const sections = phrase >= 0 ? [report.slice(report.lastIndexOf('\n', phrase) + 1), report] : [report];
  for (const section of sections) {
    for (const match of section.matchAll(ADDRESS)) {
      const address = clean(match[0]);
      if (!usable(address)) continue;
      // "A message sent by <you@…>", "received from you@…": the sender of the original, not its recipient.
      if (/(?:sent by|from|sender|reply-to)[\s:<"]*$/i.test(section.slice(Math.max(0, match.index - 30), match.index)))
        continue;
      return { recipient: address, diagnostic: diagnosticAfter(section, match.index, match[0]), fromBlock: false };
    }
  }
  return null;
}

function clean(address: string): string {
  return address.replace(/^[.'`]+|[.'`]+$/g, '').replace(/^(?:smtp|rfc822);?=?/i, '');
}

function diagnosticAfter(section: string, at: number, address: string): string {
  if (at < 0) return '';
  const start = at + address.length;
  const paragraphEnd = section.indexOf('\n\n', start);
  return section
    .slice(start, paragraphEnd < 0 ? start + 500 : Math.min(paragraphEnd, start + 500))
    .replace(/^[>:\s]+/, '')
    .replace(/\s+/g, ' ')
    .trim();
}

/** Best guess at an enhanced status code when the report gives none: from an SMTP reply, else x.0.0. */
export function guessStatus(text: string, action: string): string {
  const enhanced = STATUS.exec(text);
  if (enhanced && enhanced[1] !== '2') return enhanced[0];
  const reply = SMTP_REPLY.exec(text);
  if (reply) return `${reply[1]}.0.0`;
  return action === 'delayed' ? '4.0.0' : '5.0.0';
}
