/** Reading emails back from D1 (and R2, for large bodies) as `EmailRecord`s ready to present. */
import { REMOVED_ACCOUNTS } from '../accounts/removed.ts';
import type { Env } from '../env.ts';
import { accountEnv, findInShards, groupByShard } from '../shards/spread.ts';
import { readBlob } from './blobs.ts';
import { unpackContent } from './content.ts';
import type { AttachmentRow, EmailRecord, EmailRow, StoredBodies } from './present.ts';
import { readSourceHeaders, readsFit } from './source-headers.ts';

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

/** What to read besides the rows. */
export interface LoadOptions {
  /** The header blocks too (from the raw sources, where the rows do not hold them). */
  headers?: boolean;
  /**
   * Only the leading rows whose R2 reads (large bodies; with `headers`, header blocks) one request
   * makes (source-headers.ts `readsFit`): a list or thread then shows fewer emails.
   */
  withinReads?: boolean;
}

/**
 * Records of email rows: their bodies (the compressed content, and R2 for large bodies), and folder
 * ids, attachments and reply targets in a few queries per shard, with R2 read while D1 answers.
 */
export async function loadEmailRecords(env: Env, rows: EmailRow[], options: LoadOptions = {}): Promise<EmailRecord[]> {
  if (rows.length === 0) return [];
  // What the rows hold themselves first: local work, which tells what R2 reads the rest takes.
  const inline = await Promise.all(rows.map((row) => (row.content ? unpackContent(row.content) : undefined)));
  let records: EmailRecord[] = rows.map((row, i) => ({
    row,
    folder_ids: [],
    attachments: [],
    in_reply_to_id: null,
    bodies: inline[i],
  }));
  if (options.withinReads) records = records.slice(0, readsFit(records, { headers: options.headers === true }));
  const fromR2 = Promise.all([readLargeBodies(env, records), options.headers ? readSourceHeaders(env, records) : null]);
  fromR2.catch(() => {}); // awaited below; a failure surfaces there, not as an unhandled rejection
  const byId = new Map(records.map((r) => [r.row.id, r]));
  const groups = await groupByShard(
    env,
    records.map((r) => r.row),
  );
  for (const group of groups)
    await fillFromShard(
      group.env,
      group.rows.map((row) => byId.get(row.id)!),
    );
  await fromR2;
  return records;
}

/** Folder ids, attachments and reply targets of records whose rows all live in env.DB. */
async function fillFromShard(env: Env, records: EmailRecord[]): Promise<void> {
  const ids = JSON.stringify(records.map((r) => r.row.id));
  const [folders, atts] = await env.DB.batch([
    env.DB.prepare(
      'SELECT email_id, folder_id FROM email_folders WHERE email_id IN (SELECT value FROM json_each(?)) ORDER BY folder_id',
    ).bind(ids),
    env.DB.prepare('SELECT * FROM attachments WHERE email_id IN (SELECT value FROM json_each(?)) ORDER BY id').bind(
      ids,
    ),
  ]);
  const byId = new Map(records.map((r) => [r.row.id, r]));
  for (const f of (folders?.results ?? []) as { email_id: string; folder_id: string }[])
    byId.get(f.email_id)?.folder_ids.push(f.folder_id);
  for (const a of (atts?.results ?? []) as AttachmentRow[]) byId.get(a.email_id)?.attachments.push(a);

  // In-reply-to targets, per account (message ids are only meaningful inside one mailbox).
  const wanted = records.filter((r) => r.row.in_reply_to).map((r) => [r.row.account_id, r.row.in_reply_to]);
  if (wanted.length === 0) return;
  const { results } = await env.DB.prepare(
    `SELECT e.id, e.account_id, e.message_id FROM json_each(?) j
     JOIN emails e ON e.account_id = json_extract(j.value, '$[0]') AND e.message_id = json_extract(j.value, '$[1]')`,
  )
    .bind(JSON.stringify(wanted))
    .all<{ id: string; account_id: string; message_id: string }>();
  const targets = new Map(results.map((r) => [`${r.account_id} ${r.message_id}`, r.id]));
  for (const record of records)
    if (record.row.in_reply_to)
      record.in_reply_to_id = targets.get(`${record.row.account_id} ${record.row.in_reply_to}`) ?? null;
}

/**
 * What R2 keeps of the records' bodies (too large for the row), over what their content holds: into
 * the same object, which the header reads fill at the same time.
 */
async function readLargeBodies(env: Env, records: EmailRecord[]): Promise<void> {
  await Promise.all(
    records
      .filter((r) => r.row.body_key)
      .map(async (record) => {
        const outside = await loadBodies(env, record.row.body_key!);
        if (record.bodies) Object.assign(record.bodies, outside);
        else record.bodies = outside;
      }),
  );
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
