/**
 * What the tools answer, shaped for a model: list items without bodies or headers, one email as
 * text (HTML reduced to text) cut at a documented length with a note on how to read on, and
 * attachments listed rather than inlined. docs/mcp.md describes these shapes and lengths.
 */
import type { z } from 'zod';
import { htmlToText } from '../ingest/html.ts';
import { invalid } from '../lib/errors.ts';
import type { Email, EmailListItem } from '../schemas/emails.ts';
import type { Attendee } from '../schemas/emails.ts';

/** Characters of body text `get_email` returns per call; `body_offset` reads on. */
export const BODY_TEXT_LIMIT = 20_000;
/** Characters of body text per message in `get_thread`; `get_email` has the rest. */
export const THREAD_BODY_LIMIT = 4_000;

const address = (a: z.output<typeof Attendee>) =>
  a.display_name ? `${a.display_name} <${a.identifier}>` : a.identifier;

/** An email in a list: who, when, what, and its state; no bodies (headers when asked for). */
export function emailSummary(item: EmailListItem) {
  return {
    id: item.id,
    account_id: item.account_id,
    thread_id: item.thread_id,
    date: item.date,
    from: address(item.from_attendee),
    to: item.to_attendees.map(address),
    cc: item.cc_attendees.map(address),
    subject: item.subject,
    snippet: item.snippet,
    unread: item.unread,
    starred: item.starred,
    has_attachments: item.has_attachments,
    role: item.role,
    folders: item.folder_ids,
    ...(item.object === 'Draft' ? { draft: true } : {}),
    // Only with include_headers: true.
    ...(item.headers ? { headers: item.headers } : {}),
  };
}

/** The text of an email's body: its text part, else its HTML reduced to text. */
function bodyText(email: Email): string {
  return email.body_plain.trim() ? email.body_plain : htmlToText(email.body);
}

/** `text` from `offset`, at most `limit` characters, never splitting a surrogate pair. */
function slice(text: string, offset: number, limit: number): string {
  let end = Math.min(text.length, offset + limit);
  if (end < text.length && /[\ud800-\udbff]/.test(text[end - 1] ?? '')) end -= 1;
  return text.slice(offset, end);
}

/**
 * One email as text. The body is cut at `limit` characters from `offset`; `body.next_offset` and
 * the note say where the rest starts.
 */
export function emailText(email: Email, offset = 0, limit = BODY_TEXT_LIMIT) {
  const full = bodyText(email);
  if (offset > 0 && offset >= full.length) throw invalid(`body_offset: the body has only ${full.length} characters`);
  const text = slice(full, offset, limit);
  const next = offset + text.length < full.length ? offset + text.length : null;
  return {
    id: email.id,
    account_id: email.account_id,
    thread_id: email.thread_id,
    date: email.date,
    from: address(email.from_attendee),
    to: email.to_attendees.map(address),
    cc: email.cc_attendees.map(address),
    bcc: email.bcc_attendees.map(address),
    reply_to: email.reply_to_attendees.map(address),
    subject: email.subject,
    unread: email.is_unread,
    folders: email.folders,
    attachments: email.attachments.map((a) => ({
      id: a.id,
      name: a.name,
      mime: a.mime,
      size: a.size,
      inline: a.inline,
    })),
    body: {
      text,
      offset,
      length: full.length,
      next_offset: next,
      ...(next === null
        ? {}
        : {
            note: `The body is cut at ${limit} characters (${full.length} in all). Call get_email with email_id "${email.id}" and body_offset ${next} for the rest.`,
          }),
    },
  };
}

/** `n email(s)`: counts in summaries. */
export const count = (n: number, noun: string) => `${n} ${noun}${n === 1 ? '' : 's'}`;
