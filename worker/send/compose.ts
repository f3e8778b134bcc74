/**
 * POST /emails and POST /drafts: the request (JSON or multipart/form-data) validated, then turned
 * into the message the gateway sends (common/relay.ts OutgoingMessage): sender, reply threading,
 * text alternative, tracking.
 */
import { SendAt } from './scheduled.ts';
import { NOT_REMOVED } from '../accounts/removed.ts';
import type { Context } from 'hono';
import { z } from 'zod';
import type { OutgoingAddress, OutgoingMessage } from '../../common/relay.ts';
import type { AppEnv } from '../env.ts';
import { addressingOf, type StoredAddress } from '../emails/present.ts';
import { loadEmail } from '../emails/store.ts';
import { htmlToText } from '../ingest/html.ts';
import { normalizeAddress } from '../ingest/parse.ts';
import { toBase64 } from '../lib/crypto.ts';
import { invalid, notFound } from '../lib/errors.ts';
import { newId, parseId } from '../lib/ids.ts';
import { parseOrThrow, singleLine } from '../lib/validation.ts';
import { applyTracking, publicBase } from '../tracking/links.ts';

const ADDRESS = /^[^\s@<>(),;:"\\[\]]+@[^\s@<>(),;:"\\[\]]+$/;
const address = (label: string) =>
  singleLine(label).pipe(z.string().trim().regex(ADDRESS, `${label} must be an email address`).max(320));
const displayName = singleLine('display_name').pipe(z.string().max(256));

const Recipient = z.strictObject({ identifier: address('identifier'), display_name: displayName.optional() });
const Recipients = z.array(Recipient).max(100);

/** Header names a client may set: X-*, List-Unsubscribe, List-Unsubscribe-Post, Reply-To. */
const ALLOWED_HEADER = /^(?:X-[A-Za-z0-9-]+|List-Unsubscribe|List-Unsubscribe-Post|Reply-To)$/i;
const CustomHeader = z.strictObject({
  name: singleLine('name').refine(
    (n) => ALLOWED_HEADER.test(n),
    'only X-*, List-Unsubscribe, List-Unsubscribe-Post and Reply-To headers may be set',
  ),
  value: singleLine('value').pipe(z.string().max(998)),
});

const BASE64 = /^[A-Za-z0-9+/\r\n]*={0,2}[\r\n]*$/;
export const Attachment = z.strictObject({
  name: singleLine('name').pipe(z.string().min(1).max(255)),
  content_type: singleLine('content_type')
    .pipe(z.string().regex(/^[\w.+-]+\/[\w.+-]+$/, 'content_type must be a MIME type like application/pdf'))
    .optional(),
  content: z.string().refine((v) => BASE64.test(v), 'content must be base64'),
  cid: singleLine('cid').pipe(z.string().max(255)).optional(),
});

export const ComposeBody = z.strictObject({
  account_id: z.string(),
  to: Recipients.optional(),
  cc: Recipients.optional(),
  bcc: Recipients.optional(),
  from: z
    .strictObject({ identifier: address('from.identifier').optional(), display_name: displayName.optional() })
    .optional(),
  subject: singleLine('subject').pipe(z.string().max(998)).optional(),
  body: z.string().optional(),
  body_plain: z.string().optional(),
  reply_to: z.string().optional(),
  custom_headers: z.array(CustomHeader).max(50).optional(),
  attachments: z.array(Attachment).max(100).optional(),
  tracking_options: z
    .strictObject({
      opens: z.boolean().optional(),
      clicks: z.boolean().optional(),
      label: singleLine('label').pipe(z.string().max(255)).optional(),
    })
    .optional(),
  draft_id: z.string().optional(),
  send_at: SendAt.optional(),
});
export type ComposeBody = z.infer<typeof ComposeBody>;

/** Fields that multipart/form-data carries as JSON strings. */
export const JSON_FIELDS = new Set(['to', 'cc', 'bcc', 'from', 'custom_headers', 'attachments', 'tracking_options']);

/** The request body, JSON or multipart/form-data (files in fields named `attachments`), validated. */
export async function readComposeBody(c: Context<AppEnv>): Promise<ComposeBody> {
  const type = c.req.header('content-type') ?? '';
  if (!/^multipart\/form-data/i.test(type)) {
    const text = await c.req.text();
    let value: unknown;
    try {
      value = JSON.parse(text || '{}');
    } catch (err) {
      throw invalid(`body: malformed JSON (${(err as Error).message})`);
    }
    return parseOrThrow(ComposeBody, value);
  }
  let form: Record<string, string | File | (string | File)[]>;
  try {
    form = await c.req.parseBody({ all: true });
  } catch {
    throw invalid('body: malformed multipart/form-data');
  }
  const fields: Record<string, unknown> = {};
  const files: z.input<typeof Attachment>[] = [];
  for (const [name, raw] of Object.entries(form)) {
    const values = Array.isArray(raw) ? raw : [raw];
    for (const value of values) {
      if (typeof value !== 'string') {
        if (name !== 'attachments') throw invalid(`${name}: files are only accepted in fields named attachments`);
        files.push({
          name: value.name || 'attachment',
          content_type: value.type || undefined,
          content: toBase64(new Uint8Array(await value.arrayBuffer())),
        });
      } else if (JSON_FIELDS.has(name)) {
        try {
          fields[name] =
            name === 'attachments' ? [...((fields[name] as unknown[]) ?? []), ...JSON.parse(value)] : JSON.parse(value);
        } catch {
          throw invalid(`${name}: must be a JSON string in a form field`);
        }
      } else {
        fields[name] = value;
      }
    }
  }
  if (files.length) fields.attachments = [...((fields.attachments as unknown[]) ?? []), ...files];
  return parseOrThrow(ComposeBody, fields);
}

export interface SenderAccount {
  id: string;
  email: string;
  display_name: string | null;
}

export interface Composed {
  account: SenderAccount;
  message: OutgoingMessage;
  tracking: { id: string; label: string | null } | null;
}

const toOutgoing = (r: { identifier: string; display_name?: string | undefined }): OutgoingAddress => ({
  address: r.identifier,
  name: r.display_name ?? '',
});
const fromStored = (a: StoredAddress): OutgoingAddress => ({ address: a.address, name: a.name });

/**
 * The message to send or save. `mode` send needs a recipient (or reply_to) and applies tracking;
 * drafts take neither rule. 404 for an unknown account or reply_to email.
 */
export async function composeMessage(c: Context<AppEnv>, body: ComposeBody, mode: 'send' | 'draft'): Promise<Composed> {
  const accountId = parseId('account', body.account_id);
  const account = accountId
    ? await c.env.DB.prepare(`SELECT id, email, display_name FROM accounts WHERE id = ? AND ${NOT_REMOVED}`)
        .bind(accountId)
        .first<SenderAccount>()
    : null;
  if (!account) throw notFound('Account');

  let to = (body.to ?? []).map(toOutgoing);
  const cc = (body.cc ?? []).map(toOutgoing);
  let subject = body.subject;
  let inReplyTo: string | null = null;
  let references: string[] = [];
  if (body.reply_to !== undefined) {
    const replyId = parseId('email', body.reply_to);
    const original = replyId ? await loadEmail(c.env, replyId, account.id, { headers: false }) : null;
    if (!original) throw notFound('The reply_to email');
    const { row } = original;
    const addressing = addressingOf(original);
    if (body.to === undefined && body.cc === undefined) {
      const own = normalizeAddress(account.email);
      const { from, reply_to: replyTo } = addressing;
      // Answering one's own sent message goes to its recipients again.
      to =
        from && normalizeAddress(from.address) === own
          ? addressing.to.map(fromStored)
          : (replyTo.length ? replyTo : from ? [from] : []).map(fromStored);
    }
    subject ??= /^re:/i.test(row.subject.trim()) ? row.subject : `Re: ${row.subject}`;
    if (row.message_id) {
      inReplyTo = row.message_id;
      references = [...addressing.references, row.message_id];
    }
  }
  const bcc = (body.bcc ?? []).map(toOutgoing);
  if (mode === 'send' && to.length + cc.length + bcc.length === 0)
    throw invalid('to: at least one recipient (to, cc or bcc) is required unless reply_to is set');

  const fromAddress = body.from?.identifier ?? account.email;
  const html = body.body ?? '';
  const text = body.body_plain ?? htmlToText(html);
  const options = mode === 'send' ? body.tracking_options : undefined;
  const tracking =
    options && (options.opens || options.clicks) ? { id: newId('tracking'), label: options.label ?? null } : null;
  const trackedHtml = tracking
    ? await applyTracking(c.env, html, {
        base: publicBase(c.env, c.req.url),
        trackingId: tracking.id,
        opens: !!options?.opens,
        clicks: !!options?.clicks,
      })
    : html;

  const message: OutgoingMessage = {
    message_id: `<${newId('email').slice('email_'.length).toLowerCase()}.${crypto.randomUUID().slice(0, 8)}@${fromAddress.split('@').pop()}>`,
    from: { address: fromAddress, name: body.from?.display_name ?? account.display_name ?? '' },
    to,
    cc,
    bcc,
    subject: subject ?? '',
    html: trackedHtml,
    text,
    in_reply_to: inReplyTo,
    references,
    headers: (body.custom_headers ?? []).map((h) => ({ name: h.name, value: h.value })),
    attachments: (body.attachments ?? []).map((a) => ({
      filename: a.name,
      content_type: a.content_type ?? null,
      cid: a.cid ?? null,
      content: a.content.replace(/[\r\n]/g, ''),
    })),
  };
  return { account, message, tracking };
}
