/**
 * The first two steps of applying new mail (sync/messages.ts): each arrival parsed (or taken as the
 * changes endpoint prepared it), then everything the decisions need, one query per kind for the
 * whole change.
 */
import type { MessageIn } from '../../common/relay.ts';
import type { ParsedMessage } from '../ingest/types.ts';
import { outgoingByMessageId } from '../send/outgoing.ts';
import { type Threader, threadedMessage } from '../threads/threader.ts';
import { emailsByBaseIdentity } from './identity.ts';
import { membershipsOf } from './memberships.ts';
import { prepareMessage } from './prepare.ts';
import { sourceOf } from './sources.ts';
import type { SyncState } from './state.ts';
import { timed } from './stats.ts';

export interface Arrival {
  message: MessageIn;
  raw: Uint8Array;
  mail: ParsedMessage;
  base: string;
}

/** Parses the new messages (a staged source is read from R2, at most its head: sync/sources.ts). */
export function parseArrivals(state: SyncState, fresh: MessageIn[]): Promise<Arrival[]> {
  return timed(state.stats, 'parseMs', () =>
    Promise.all(
      fresh.map(async (message) => {
        const ready = state.prepared?.get(message);
        if (ready) return { message, ...ready };
        const { raw, cut } = await sourceOf(state, message);
        return { message, ...(await prepareMessage(message, raw, cut)) };
      }),
    ),
  );
}

/** What the decisions about the arrivals need: their identical copies, where those are, sends and replies. */
export function lookupsFor(state: SyncState, arrivals: Arrival[], threader: Threader) {
  const db = state.env.DB;
  const accountId = state.account.accountId;
  return timed(state.stats, 'lookupMs', async () => {
    // Only where the identical copies are waits for them: the other reads go at once, so new mail
    // without copies costs one round of D1 reads, not two.
    const others = Promise.all([
      outgoingByMessageId(
        db,
        accountId,
        arrivals.flatMap((a) => a.mail.message_id ?? []),
      ),
      // What the new emails answer, for `in_reply_to.id` in their events (emails of this change join as they are made).
      emailIdsByMessageId(
        state,
        arrivals.flatMap((a) => a.mail.in_reply_to ?? []),
      ),
      threader.prefetch(arrivals.map((a) => threadedMessage(a.mail, 0, a.message.gm_thrid))),
    ]);
    others.catch(() => undefined); // awaited below, unless the copies' read fails first
    const copies = await emailsByBaseIdentity(
      db,
      accountId,
      arrivals.map((a) => a.base),
    );
    const [placed, [outgoing, repliedTo]] = await Promise.all([
      membershipsOf(
        state,
        [...copies.values()].flat().map((e) => e.id),
      ),
      others,
    ]);
    return { copies, placed, outgoing, repliedTo };
  });
}

/** Ids of this account's emails by Message-ID (the earliest one when several share it), in one query. */
async function emailIdsByMessageId(state: SyncState, messageIds: string[]): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  if (messageIds.length === 0) return out;
  const { results } = await state.env.DB.prepare(
    'SELECT id, message_id FROM emails WHERE account_id = ? AND message_id IN (SELECT value FROM json_each(?)) ORDER BY date_ms DESC',
  )
    .bind(state.account.accountId, JSON.stringify([...new Set(messageIds)]))
    .all<{ id: string; message_id: string }>();
  for (const r of results) out.set(r.message_id, r.id);
  return out;
}
