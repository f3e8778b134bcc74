/**
 * POST /emails with `send_at`: the message is composed and stored now, exactly as for an immediate
 * send, and the account's object sends it at its time (durable/schedules.ts).
 */
import type { Env } from '../env.ts';
import { newId } from '../lib/ids.ts';
import { iso, isoNow } from '../lib/time.ts';
import { randomToken } from '../lib/crypto.ts';
import { accountObject } from '../durable/account-stub.ts';
import type { ComposeBody, Composed } from './compose.ts';
import { forgetOutgoing, outgoingBlobKey, recordOutgoing } from './outgoing.ts';
import type { Claim } from './idempotency.ts';
import { accountEnv } from '../shards/spread.ts';

export async function scheduleComposed(
  env: Env,
  claim: Claim,
  request: ComposeBody,
  { account, message, tracking }: Composed,
  sentFolder: string | null,
  sendAtMs: number,
) {
  const id = newId('scheduled');
  const name = randomToken('', 20);
  const key = outgoingBlobKey(account.id, name);
  const sendAt = iso(sendAtMs);
  const answer = {
    object: 'EmailScheduled' as const,
    id,
    account_id: account.id,
    send_at: sendAt,
    message_id: message.message_id,
    status: 'scheduled' as const,
  };
  const mail = (await accountEnv(env, account.id)).DB;
  let recorded = false;
  try {
    await env.BLOBS.put(key, JSON.stringify(message), { httpMetadata: { contentType: 'application/json' } });
    // The outgoing record exists from now on, so the Sent copy is recognised (origin api, tracking).
    await recordOutgoing(mail, {
      account_id: account.id,
      message_id: message.message_id,
      kind: 'send',
      tracking_id: tracking?.id ?? null,
      tracking_label: tracking?.label ?? null,
      draft_id: null,
      created_at: isoNow(),
    });
    recorded = true;
    // From here the key is settled by the schedule (send/idempotency.ts), never taken over.
    await claim.handed(account.id, message.message_id, answer);
    // The object records it, then lists it (scheduled_emails): a listed schedule is one it will send.
    await accountObject(env, account.id).schedule(
      { id, account_id: account.id, send_at_ms: sendAtMs, name, message_id: message.message_id, append_to: sentFolder },
      {
        id,
        account_id: account.id,
        send_at: sendAt,
        created_at: isoNow(),
        message_id: message.message_id,
        subject: request.subject ?? null,
        to_json: JSON.stringify(request.to ?? []),
        status: 'scheduled',
        error: null,
      },
    );
  } catch (err) {
    if (recorded) await forgetOutgoing(mail, account.id, message.message_id);
    await env.BLOBS.delete(key);
    throw err;
  }
  return answer;
}
