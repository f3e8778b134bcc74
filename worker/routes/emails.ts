import { Hono, type Context } from 'hono';
import type { AppEnv } from '../env.ts';
import { presentEmailList, presentEmailSingle, type EmailRow } from '../emails/present.ts';
import { buildEmailQuery, DraftListQuery, EmailListQuery, filtersKey } from '../emails/query.ts';
import { readBlob } from '../emails/blobs.ts';
import { loadEmail, loadEmailRecords, type LoadOptions } from '../emails/store.ts';
import { notFound } from '../lib/errors.ts';
import { parseId } from '../lib/ids.ts';
import { cursorList } from '../lib/paging.ts';
import { parseQuery } from '../lib/validation.ts';
import { keyOrder, mergePages, onListShards } from '../shards/spread.ts';

/** The email named in the path (optionally within the account in the path), or 404; with its headers unless told otherwise. */
export async function emailFromPath(c: Context<AppEnv>, accountParam?: string, options?: LoadOptions) {
  const emailId = parseId('email', c.req.param('email_id'));
  const accountId = accountParam === undefined ? undefined : parseId('account', accountParam);
  if (!emailId || accountId === null) throw notFound('Email');
  const record = await loadEmail(c.env, emailId, accountId, options);
  if (!record) throw notFound('Email');
  return record;
}

/** Content-Disposition with a filename every client reads (RFC 6266: ASCII fallback plus UTF-8). */
function contentDisposition(kind: 'attachment' | 'inline', filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]|["\\]/g, '_') || 'attachment';
  return `${kind}; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(filename)}`;
}

/** For the routes that answer with an email's source or attachments, not its headers. */
const WITHOUT_HEADERS: LoadOptions = { headers: false };

/** The lists' order: newest first by (date, id). */
const NEWEST_FIRST = keyOrder((row: EmailRow) => [row.date_ms, row.id], [true, true]);

/** GET /emails and GET /drafts: one keyset-paged query (per shard, merged), newest first. */
async function listEmails(c: Context<AppEnv>, draftsOnly: boolean) {
  const q: Partial<EmailListQuery> & { limit: number } = draftsOnly
    ? parseQuery(c, DraftListQuery)
    : parseQuery(c, EmailListQuery);
  const built = buildEmailQuery(q, { draftsOnly });
  const accountId = q.account_id === undefined ? undefined : parseId('account', q.account_id);
  const rows = built.empty
    ? []
    : mergePages(
        await onListShards(c.env, accountId, async (env) => {
          const { results } = await env.DB.prepare(built.sql)
            .bind(...built.params)
            .all<EmailRow>();
          return results;
        }),
        q.limit,
        NEWEST_FIRST,
      );
  // A page holds the emails whose R2 reads (large bodies; with headers, header blocks) one request
  // makes (emails/source-headers.ts); the next page goes on.
  const records = await loadEmailRecords(c.env, rows.slice(0, q.limit), {
    headers: q.include_headers,
    withinReads: true,
  });
  const byId = new Map(records.map((r) => [r.row.id, r]));
  return cursorList(
    draftsOnly ? 'Drafts' : 'Emails',
    rows.slice(0, records.length + 1),
    records.length,
    filtersKey(q, draftsOnly ? 'drafts:' : ''),
    (row) => [row.date_ms, row.id],
    (row) => presentEmailList(byId.get(row.id)!, { includeHeaders: q.include_headers }),
  );
}

export const emails = new Hono<AppEnv>()
  .get('/', async (c) => c.json(await listEmails(c, false)))
  .get('/:email_id', async (c) => c.json(presentEmailSingle(await emailFromPath(c))))
  .get('/:email_id/raw', async (c) => {
    const record = await emailFromPath(c, undefined, WITHOUT_HEADERS);
    const blob = record.row.raw_key ? await readBlob(c.env, record.row.raw_key) : null;
    if (!blob) throw notFound('Raw source');
    return new Response(blob.object.body, {
      headers: {
        'Content-Type': 'message/rfc822',
        'Content-Length': String(blob.size),
        'Content-Disposition': contentDisposition('attachment', `${record.row.id}.eml`),
      },
    });
  })
  .get('/:email_id/attachments/:attachment_id', async (c) => {
    const record = await emailFromPath(c, undefined, WITHOUT_HEADERS);
    const attachmentId = parseId('attachment', c.req.param('attachment_id'));
    const attachment = record.attachments.find((a) => a.id === attachmentId);
    const blob = attachment ? await readBlob(c.env, attachment.blob_key) : null;
    if (!attachment || !blob) throw notFound('Attachment');
    return new Response(blob.object.body, {
      headers: {
        'Content-Type': attachment.mime || 'application/octet-stream',
        'Content-Length': String(blob.size),
        'Content-Disposition': contentDisposition('attachment', attachment.name || 'attachment'),
      },
    });
  });

export const drafts = new Hono<AppEnv>().get('/', async (c) => c.json(await listEmails(c, true)));
