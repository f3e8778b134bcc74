/** Reading emails back from D1 (and R2, for large bodies) as `EmailRecord`s ready to present. */
import { REMOVED_ACCOUNTS } from '../accounts/removed.ts';
import type { Env } from '../env.ts';
import { accountEnv, findInShards, groupByShard } from '../shards/spread.ts';
import { readBlob } from './blobs.ts';
import { unpackContent } from './content.ts';
import type { AttachmentRow, EmailRecord, EmailRow, StoredBodies } from './present.ts';
import { readSourceHeaders } from './source-headers.ts';

/** The R2 keys of an email's blobs, derived from the account and the email's identity digest. */
export const blobKeys = {
  raw: (accountId: string, digest: string) => `accounts/${accountId}/raw/${digest}.eml`,
  bodies: (accountId: string, digest: string) => `accounts/${accountId}/bodies/${digest}.json`,
  attachment: (accountId: string, digest: string, index: number) =>
    `accounts/${accountId}/attachments/${digest}/${index}`,
  /** One applied change's new sources, large bodies and attachments (see blobs.ts), by a digest of the change. */
  segment: (accountId: string, digest: string) => `accounts/${accountId}/segments/${digest}.bin`,
  /** A large source the gateway stored ahead of its change, by SHA-256; it becomes the email's raw source. */
  staged: (accountId: string, sha256: string) => `accounts/${accountId}/staged/${sha256}.eml`,
  accountPrefix: (accountId: string) => `accounts/${accountId}/`,
};

/** What to read besides the rows: `headers`, the header blocks (from the raw sources, where the rows do not hold them). */
export interface LoadOptions {
  headers?: boolean;
}

/**
 * Folder ids, attachments, reply targets and R2 bodies for a set of email rows, in a few queries
 * per shard; with `headers`, the header blocks too (source-headers.ts: a list or thread takes only
 * as many emails as `readsFit` allows).
 */
export async function loadEmailRecords(env: Env, rows: EmailRow[], options: LoadOptions = {}): Promise<EmailRecord[]> {
  if (rows.length === 0) return [];
  const groups = await groupByShard(env, rows);
  const loaded = new Map<string, EmailRecord>();
  for (const group of groups)
    for (const record of await loadShardRecords(group.env, group.rows)) loaded.set(record.row.id, record);
  const records = rows.map((row) => loaded.get(row.id)!);
  if (options.headers) await readSourceHeaders(env, records);
  return records;
}

/** `loadEmailRecords` of rows that all live in env.DB. */
async function loadShardRecords(env: Env, rows: EmailRow[]): Promise<EmailRecord[]> {
  // R2 reads (large bodies, header blocks in sources) go on while D1 answers.
  const bodies = Promise.all(rows.map((row) => storedBodies(env, row)));
  bodies.catch(() => {}); // awaited below; a failure surfaces there, not as an unhandled rejection
  const folderIds = new Map<string, string[]>();
  const attachments = new Map<string, AttachmentRow[]>();
  const replyTargets = new Map<string, string>();

  const ids = JSON.stringify(rows.map((r) => r.id));
  const [folders, atts] = await env.DB.batch([
    env.DB.prepare(
      'SELECT email_id, folder_id FROM email_folders WHERE email_id IN (SELECT value FROM json_each(?)) ORDER BY folder_id',
    ).bind(ids),
    env.DB.prepare('SELECT * FROM attachments WHERE email_id IN (SELECT value FROM json_each(?)) ORDER BY id').bind(
      ids,
    ),
  ]);
  for (const f of (folders?.results ?? []) as { email_id: string; folder_id: string }[]) {
    folderIds.set(f.email_id, [...(folderIds.get(f.email_id) ?? []), f.folder_id]);
  }
  for (const a of (atts?.results ?? []) as AttachmentRow[]) {
    attachments.set(a.email_id, [...(attachments.get(a.email_id) ?? []), a]);
  }

  // In-reply-to targets, per account (message ids are only meaningful inside one mailbox).
  const wanted = rows.filter((r) => r.in_reply_to).map((r) => [r.account_id, r.in_reply_to]);
  if (wanted.length) {
    const { results } = await env.DB.prepare(
      `SELECT e.id, e.account_id, e.message_id FROM json_each(?) j
       JOIN emails e ON e.account_id = json_extract(j.value, '$[0]') AND e.message_id = json_extract(j.value, '$[1]')`,
    )
      .bind(JSON.stringify(wanted))
      .all<{ id: string; account_id: string; message_id: string }>();
    for (const r of results) replyTargets.set(`${r.account_id} ${r.message_id}`, r.id);
  }

  const stored = await bodies;
  return rows.map((row, i) => ({
    row,
    folder_ids: folderIds.get(row.id) ?? [],
    attachments: attachments.get(row.id) ?? [],
    in_reply_to_id: row.in_reply_to ? (replyTargets.get(`${row.account_id} ${row.in_reply_to}`) ?? null) : null,
    bodies: stored[i],
  }));
}

/** What the row's text columns do not hold: its `content`, and what R2 keeps of it. */
async function storedBodies(env: Env, row: EmailRow): Promise<StoredBodies | undefined> {
  if (!row.content && !row.body_key) return undefined;
  const [inline, outside] = await Promise.all([
    row.content ? unpackContent(row.content) : {},
    row.body_key ? loadBodies(env, row.body_key) : {},
  ]);
  return { ...inline, ...outside };
}

async function loadBodies(env: Env, key: string): Promise<StoredBodies> {
  const blob = await readBlob(env, key);
  if (!blob) return { html: '', plain: '' };
  return blob.object.json<StoredBodies>();
}

/** One email by id (optionally constrained to an account), or null; with its headers unless told otherwise. */
export async function loadEmail(
  env: Env,
  emailId: string,
  accountId?: string,
  options: LoadOptions = { headers: true },
): Promise<EmailRecord | null> {
  const visible = `account_id NOT IN (${REMOVED_ACCOUNTS})`;
  const row = accountId
    ? await (await accountEnv(env, accountId)).DB.prepare(
        `SELECT * FROM emails WHERE id = ? AND account_id = ? AND ${visible}`,
      )
        .bind(emailId, accountId)
        .first<EmailRow>()
    : await findInShards(env, (shard) =>
        shard.DB.prepare(`SELECT * FROM emails WHERE id = ? AND ${visible}`).bind(emailId).first<EmailRow>(),
      );
  if (!row) return null;
  const [record] = await loadEmailRecords(env, [row], options);
  return record ?? null;
}
