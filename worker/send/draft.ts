/**
 * POST /emails with `draft_id`: the saved draft is what is sent. Its recipients, subject, bodies,
 * attachments and reply target are the defaults; every field the request gives wins. After the send
 * the draft leaves Drafts (the account's object expunges it; the orphan step then deletes the email
 * with `email.draft.delete`).
 */
import { unwrap } from '../commands/holder.ts';
import { accountObject } from '../durable/account-stub.ts';
import type { Env } from '../env.ts';
import { addressingOf, emailHtml, type EmailRow, type StoredAddress } from '../emails/present.ts';
import { readBlob } from '../emails/blobs.ts';
import { loadEmailRecords } from '../emails/store.ts';
import { notFound } from '../lib/errors.ts';
import { parseId } from '../lib/ids.ts';
import { toBase64 } from '../lib/crypto.ts';
import type { ComposeBody } from './compose.ts';
import { accountEnv } from '../shards/spread.ts';

export interface DraftToSend {
  /** The request with the draft's fields filled in where it gave none. */
  body: ComposeBody;
  /** The draft's email id, to remove it from Drafts once sent. */
  emailId: string;
}

/** The draft's recipients of one kind; none is "not given" (so a reply target can fill them in). */
function recipients(addresses: StoredAddress[]) {
  const list = addresses.map((a) => ({
    identifier: a.address,
    ...(a.name ? { display_name: a.name } : {}),
  }));
  return list.length ? list : undefined;
}

const nonEmpty = <K extends string, V>(key: K, value: V | undefined) =>
  (value === undefined ? {} : { [key]: value }) as Partial<Record<K, V>>;

export async function draftToSend(env: Env, body: ComposeBody & { draft_id: string }): Promise<DraftToSend> {
  const draftId = parseId('draft', body.draft_id);
  const accountId = parseId('account', body.account_id);
  const row =
    draftId && accountId
      ? await (await accountEnv(env, accountId)).DB.prepare(
          'SELECT * FROM emails WHERE draft_id = ? AND account_id = ? AND is_draft = 1',
        )
          .bind(draftId, accountId)
          .first<EmailRow>()
      : null;
  const [record] = row ? await loadEmailRecords(env, [row]) : [];
  if (!record) throw notFound('Draft');
  const attachments = [];
  for (const a of record.attachments) {
    const blob = await readBlob(env, a.blob_key);
    if (!blob) throw notFound(`Attachment ${a.id} of the draft`);
    attachments.push({
      name: a.name || 'attachment',
      ...(a.mime ? { content_type: a.mime } : {}),
      content: toBase64(new Uint8Array(await blob.object.arrayBuffer())),
      ...(a.cid ? { cid: a.cid } : {}),
    });
  }
  const { draft_id: _draftId, ...request } = body;
  const html = emailHtml(record);
  const addressing = addressingOf(record);
  const plain = record.bodies?.plain ?? record.row.body_plain ?? '';
  const fromDraft: ComposeBody = {
    account_id: body.account_id,
    ...nonEmpty('to', recipients(addressing.to)),
    ...nonEmpty('cc', recipients(addressing.cc)),
    ...nonEmpty('bcc', recipients(addressing.bcc)),
    subject: record.row.subject,
    body: html,
    // A new HTML body without its own text gets a text alternative derived from it, not the draft's.
    ...(request.body === undefined && plain ? { body_plain: plain } : {}),
    ...(record.in_reply_to_id ? { reply_to: record.in_reply_to_id } : {}),
    attachments,
  };
  const merged = { ...fromDraft };
  for (const [key, value] of Object.entries(request)) if (value !== undefined) Object.assign(merged, { [key]: value });
  return { body: merged, emailId: record.row.id };
}

/**
 * The sent draft leaves Drafts: every copy is expunged through the account's object. The send has
 * happened whatever this does, so a failure is logged (the draft stays) and the send still succeeds.
 */
export async function removeSentDraft(env: Env, accountId: string, emailId: string): Promise<void> {
  try {
    unwrap(await accountObject(env, accountId).modifyEmail(emailId, { folder_ids: [] }));
  } catch (err) {
    console.error(`account ${accountId}: the sent draft ${emailId} could not be removed from Drafts:`, String(err));
  }
}
