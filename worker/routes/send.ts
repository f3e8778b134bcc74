/** POST /emails (send) and POST /drafts (save a draft): compose, then the account's object has the gateway do it. */
import { Hono, type Context } from 'hono';
import type { AppEnv, Env } from '../env.ts';
import type { SendRequest } from '../durable/send-queue.ts';
import { unwrap } from '../commands/holder.ts';
import { ApiError, invalid } from '../lib/errors.ts';
import { newId } from '../lib/ids.ts';
import { isoNow } from '../lib/time.ts';
import { randomToken } from '../lib/crypto.ts';
import { composeMessage, readComposeBody } from '../send/compose.ts';
import { draftToSend, removeSentDraft } from '../send/draft.ts';
import { type Claim, SendUnresolved, idempotent } from '../send/idempotency.ts';
import { scheduleComposed } from '../send/schedule-send.ts';
import { parseSendAt } from '../send/scheduled.ts';
import { forgetOutgoing, outgoingBlobKey, recordOutgoing } from '../send/outgoing.ts';
import { accountObject } from '../durable/account-stub.ts';
import { accountEnv } from '../shards/spread.ts';

async function sendOrSave(c: Context<AppEnv>, mode: 'send' | 'draft') {
  const request = await readComposeBody(c);
  const { draft_id: sendDraft } = request;
  if (sendDraft !== undefined && mode === 'draft') throw invalid('draft_id: only POST /emails sends a saved draft');
  const scheduled = request.send_at !== undefined;
  if (scheduled && mode === 'draft') throw invalid('send_at: only POST /emails schedules a send');
  if (scheduled && sendDraft !== undefined)
    throw invalid('send_at: a saved draft is sent at once (draft_id); schedule its content without draft_id');
  const scope = mode === 'send' ? 'POST /emails' : 'POST /drafts';
  const work = async (claim: Claim) => {
    // Checked inside the key's claim: a replay of an earlier schedule answers even after its time.
    const sendAtMs = request.send_at === undefined ? null : parseSendAt(request.send_at);
    const draft = sendDraft === undefined ? null : await draftToSend(c.env, { ...request, draft_id: sendDraft });
    const { account, message, tracking } = await composeMessage(c, draft?.body ?? request, mode);
    const role = mode === 'send' ? 'SENT' : 'DRAFTS';
    const mail = (await accountEnv(c.env, account.id)).DB;
    const folder = await mail
      .prepare('SELECT provider_id FROM folders WHERE account_id = ? AND role = ? ORDER BY provider_id LIMIT 1')
      .bind(account.id, role)
      .first<{ provider_id: string }>();
    if (mode === 'draft' && !folder)
      throw new ApiError('provider_rejected', 'The mailbox has no Drafts folder to save the draft in.');
    if (sendAtMs !== null)
      return scheduleComposed(
        c.env,
        claim,
        request,
        { account, message, tracking },
        folder?.provider_id ?? null,
        sendAtMs,
      );

    // A place in the account's queue of sends before anything is stored: a full queue is a 429.
    const stub = accountObject(c.env, account.id);
    const admission = await stub.admitSend();
    if (!admission.ok) {
      throw new ApiError(
        'rate_limited',
        `This account has as many sends queued as it may (SEND_QUEUE_LIMIT); retry after ${admission.retry_after_s} s.`,
        { 'Retry-After': String(admission.retry_after_s) },
      );
    }
    // The message goes to R2 (it can be 30 MB, too big for the control socket); the gateway fetches
    // it, and the account's object deletes it once the send has ended.
    const name = randomToken('', 20);
    const key = outgoingBlobKey(account.id, name);
    const draftId = mode === 'draft' ? newId('draft') : null;
    const answer = answerFor(mode, account.id, message.message_id, tracking?.id ?? null, draftId);
    let recorded = false;
    try {
      await c.env.BLOBS.put(key, JSON.stringify(message), { httpMetadata: { contentType: 'application/json' } });
      // Recorded first, so the copy is recognised even when its sync overtakes the gateway's answer.
      await recordOutgoing(mail, {
        account_id: account.id,
        message_id: message.message_id,
        kind: mode,
        tracking_id: tracking?.id ?? null,
        tracking_label: tracking?.label ?? null,
        draft_id: draftId,
        created_at: isoNow(),
      });
      recorded = true;
      // From here the key is settled by the outcome, never taken over (send/idempotency.ts).
      await claim.handed(account.id, message.message_id, answer);
    } catch (err) {
      await stub.releaseSend(admission.ticket);
      if (recorded) await forgetOutgoing(mail, account.id, message.message_id);
      await c.env.BLOBS.delete(key);
      throw err;
    }
    await carriedOut(c.env, stub, admission.ticket, answer, {
      op: 'send',
      account_id: account.id,
      mode,
      key: name,
      append_to: folder?.provider_id ?? null,
    });
    if (draft) await removeSentDraft(c.env, account.id, draft.emailId);
    return answer;
  };
  return idempotent(c, scope, request, work, scheduled ? 202 : 200);
}

/** The answer of a send (EmailSent) or a saved draft (DraftCreated). */
function answerFor(
  mode: 'send' | 'draft',
  accountId: string,
  messageId: string,
  trackingId: string | null,
  draftId: string | null,
) {
  return mode === 'send'
    ? {
        object: 'EmailSent' as const,
        account_id: accountId,
        message_id: messageId,
        provider_id: null,
        tracking_id: trackingId,
      }
    : {
        object: 'DraftCreated' as const,
        account_id: accountId,
        draft_id: draftId,
        message_id: messageId,
        tracking_id: null,
      };
}

/**
 * The account's object owns the send from here, and records its outcome itself. Only an answer
 * saying nothing was sent (a refusal, no gateway) forgets the record and frees the key; anything
 * else not ok (no answer, the object failing under us) is unresolved: the record stays, so a late
 * report or the synced copy settles it (send/idempotency.ts).
 */
async function carriedOut(
  env: Env,
  stub: ReturnType<typeof accountObject>,
  ticket: string,
  answer: { account_id: string; message_id: string },
  request: SendRequest,
): Promise<void> {
  const outcome = await stub.sendOutgoing(ticket, request, answer.message_id).catch(() => null);
  if (outcome?.ok === false && outcome.nothing_sent) {
    await forgetOutgoing((await accountEnv(env, answer.account_id)).DB, answer.account_id, answer.message_id);
    unwrap(outcome);
  }
  if (!outcome?.ok) {
    const reason = outcome ? outcome.detail : 'The account object failed while sending.';
    throw new SendUnresolved(answer.account_id, answer.message_id, answer, reason);
  }
}

export const sendEmail = new Hono<AppEnv>().post('/', (c) => sendOrSave(c, 'send'));
export const saveDraft = new Hono<AppEnv>().post('/', (c) => sendOrSave(c, 'draft'));
