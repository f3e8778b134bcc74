/**
 * Messages that appeared in a folder. Each (folder, UID) becomes exactly one membership of exactly
 * one email:
 * - the email that had this message in this folder under an earlier UIDVALIDITY (a stale
 *   membership), or under a UID the gateway says is being expunged (it left and came back), gets
 *   its new UID: same id, no event unless its flags changed;
 * - else an email with the same identity that is not in this folder yet gains the folder (a copy,
 *   or the arriving side of a move: it is no longer an orphan), with one email.update; among
 *   identical copies, the one a move most likely came from: an orphan, else one whose place the
 *   gateway says is being expunged (`vanishing`);
 * - else a new email (a second copy in the same folder is a second email), with email.new.
 */
import type { Change, MessageIn } from '../../common/relay.ts';
import { emailEventData } from '../emails/events.ts';
import type { AttachmentRow, EmailRecord, EmailRow, StoredBodies } from '../emails/present.ts';
import { blobKeys, loadEmailRecords } from '../emails/store.ts';
import type { FolderRow } from '../folders/present.ts';
import type { ParsedMessage } from '../ingest/types.ts';
import { isoNow } from '../lib/time.ts';
import { outgoingFields, type OutgoingRecord } from '../send/outgoing.ts';
import { Threader, threadedMessage } from '../threads/threader.ts';
import { attachmentRows, buildEmailRow } from './email-row.ts';
import { copyIdentity } from './identity.ts';
import { flagState, membershipsByUid, refreshEmails, target, type FlagState } from './memberships.ts';
import { NewMailRows } from './new-mail.ts';
import { SeparateObjects, Segment, type BlobWriter } from './segment.ts';
import { tooLargeNotice } from './sources.ts';
import { lookupsFor, parseArrivals, type Arrival } from './arrivals.ts';
import { addEvent, emptyResult, endUnit, type ChangeResult, type SyncState } from './state.ts';
import { directoryDb } from '../shards/registry.ts';

/** At most this many email.update events for one thread merge (a runaway merge stays bounded). */
const MAX_MERGE_EVENTS = 500;

type Vanishing = NonNullable<Extract<Change, { type: 'messages' }>['vanishing']>;

/**
 * `initial`: older mail pulled by the initial sync, taken below the cursor when inside its window
 * (the cursor stays). `vanishing`: expunges elsewhere the gateway will report next.
 */
export async function applyMessages(
  state: SyncState,
  path: string,
  uidvalidity: number,
  messages: MessageIn[],
  { initial = false, vanishing = [] }: { initial?: boolean; vanishing?: Vanishing } = {},
): Promise<ChangeResult> {
  const result = emptyResult();
  const where = target(state, path, uidvalidity);
  if (!where || messages.length === 0) return result;
  const { folder, cursor } = where;
  const db = state.env.DB;

  const known = await membershipsByUid(
    state,
    folder.id,
    messages.map((m) => m.uid),
  );
  const wanted = initial
    ? (m: MessageIn) => !!state.initialSync?.accepts(path, uidvalidity, m)
    : (m: MessageIn) => m.uid > cursor.last_uid || cursor.resync;
  const fresh = messages.filter((m) => !known.has(m.uid) && wanted(m));
  const staged = (m: MessageIn) => (m.staged ? [blobKeys.staged(state.account.accountId, m.staged)] : []);
  // Staged sources of messages passed over here are not needed (unless an email already uses them).
  result.unusedStaged.push(...messages.filter((m) => !fresh.includes(m)).flatMap(staged));
  if (initial)
    state.initialSync?.pulled(
      path,
      uidvalidity,
      messages.map((m) => m.uid),
    );
  else cursor.last_uid = Math.max(cursor.last_uid, ...messages.map((m) => m.uid));
  if (fresh.length === 0) return result;
  const tooLarge = fresh.find((m) => m.too_large);
  if (tooLarge)
    result.directory.push(
      directoryDb(state.env)
        .prepare('UPDATE accounts SET last_error = ?, updated_at = ? WHERE id = ?')
        .bind(tooLargeNotice(path, tooLarge), isoNow(), state.account.accountId),
    );

  const stats = state.stats;
  if (stats) stats.messages += fresh.length;
  const arrivals = await parseArrivals(state, fresh);
  const accountId = state.account.accountId;
  const threader = new Threader(db, accountId);
  const { copies, placed, outgoing, repliedTo } = await lookupsFor(state, arrivals, threader);
  const buildStart = performance.now();
  const rows = new NewMailRows(accountId);
  const segment = await Segment.of(
    accountId,
    folder.id,
    uidvalidity,
    fresh.map((m) => m.uid),
  );
  const now = isoNow();
  const adoptedFlags = new Map<string, FlagState>();
  const leaving = leavingPlaces(state, vanishing);

  for (const arrival of arrivals) {
    const { message, mail } = arrival;
    const flags = flagState(message.flags);
    const siblings = copies.get(arrival.base) ?? [];
    const here = (e: EmailRow) => (placed.get(e.id) ?? []).find((m) => m.folder_id === folder.id);
    // Its old place here is stale (a renumbered folder) or being expunged (it left and came back).
    const stale = siblings.find((e) => {
      const uid = here(e)?.uid ?? 0;
      return uid < 0 || leaving.has(`${folder.id}:${uid}`);
    });
    const elsewhere = stale
      ? undefined
      : pickElsewhere(
          siblings.filter((e) => !here(e)),
          (e) => (placed.get(e.id) ?? []).some((m) => leaving.has(`${m.folder_id}:${m.uid}`)),
        );
    const adopted = stale ?? elsewhere;
    if (adopted) {
      const copy = {
        folder_id: folder.id,
        uid: message.uid,
        seen: flags.unread ? 0 : 1,
        flagged: flags.starred ? 1 : 0,
      };
      if (stale) rows.restore(stale.id, copy);
      else rows.addMembership(adopted.id, copy);
      rows.unorphan(adopted.id);
      // The places it is leaving (a move's source) go in the same unit: a move is one email.update, and
      // the expunge reported next finds nothing left to do.
      const departed = (placed.get(adopted.id) ?? []).filter(
        (m) => m.folder_id !== folder.id && leaving.has(`${m.folder_id}:${m.uid}`),
      );
      for (const m of departed) rows.depart(adopted.id, m);
      const kept = (placed.get(adopted.id) ?? []).filter((m) => m.folder_id !== folder.id && !departed.includes(m));
      placed.set(adopted.id, [...kept, copy]);
      adoptedFlags.set(adopted.id, flags);
      result.unusedStaged.push(...staged(message));
      continue;
    }
    // A renumbered folder is read again from its start: its mail from before the connect stays out.
    if (!initial && cursor.resync && arrivedBeforeConnect(message, state.account.connectedAtMs)) {
      result.unusedStaged.push(...staged(message));
      continue;
    }

    const identity = copyIdentity(arrival.base, nextCopy(siblings));
    const sentByApi = arrival.mail.message_id ? outgoing.get(arrival.mail.message_id) : undefined;
    const blobs = message.staged ? new SeparateObjects(result) : segment;
    const made = { identity, folder, flags, threader, now, sentByApi, blobs, rows };
    const { row, attachments, content } = await storeNewEmail(state, arrival, made, result);
    copies.set(arrival.base, [...siblings, row]);
    placed.set(row.id, [{ folder_id: folder.id, uid: message.uid, seen: row.unread ? 0 : 1, flagged: row.starred }]);
    if (row.message_id && !repliedTo.has(row.message_id)) repliedTo.set(row.message_id, row.id);
    const inReplyToId = row.in_reply_to ? (repliedTo.get(row.in_reply_to) ?? null) : null;
    const record: EmailRecord = {
      row,
      folder_ids: [folder.id],
      attachments,
      in_reply_to_id: inReplyToId,
      bodies: content,
    };
    emitNew(state, result, record, mail);
  }
  segment.close(result);
  result.statements.push(...rows.statements(db, state.account.ownAddresses));
  if (stats) {
    stats.created += rows.created;
    stats.buildMs += performance.now() - buildStart;
  }

  // Emails that gained a folder (or their UID back): new role, flags from this copy, one email.update each.
  if (adoptedFlags.size)
    await refreshEmails(state, [...adoptedFlags.keys()], result, {
      folder,
      copies: adoptedFlags,
      added: true,
      departed: leaving,
    });
  // The change is one unit: its rows and events commit together.
  endUnit(result);
  return result;
}

/**
 * INTERNALDATE has whole seconds: mail that arrived in the second of the connect may have come after
 * it, so only an earlier second counts as before (letting in such a message beats losing one).
 */
function arrivedBeforeConnect(message: MessageIn, connectedAtMs: number): boolean {
  return Date.parse(message.internal_date) < Math.floor(connectedAtMs / 1000) * 1000;
}

/** Among copies not in the folder yet, the one a move most likely came from: an orphan, else one leaving its place. */
function pickElsewhere(candidates: EmailRow[], isLeaving: (e: EmailRow) => boolean): EmailRow | undefined {
  return candidates.find((e) => e.orphaned_at_ms != null) ?? candidates.find(isLeaving) ?? candidates[0];
}

/** The (folder id, UID) places of the gateway's `vanishing` hint, under the UIDVALIDITY we know. */
function leavingPlaces(state: SyncState, vanishing: Vanishing): Set<string> {
  const places = new Set<string>();
  for (const { path, uidvalidity, uids } of vanishing) {
    const where = target(state, path, uidvalidity);
    if (where) for (const uid of uids) places.add(`${where.folder.id}:${uid}`);
  }
  return places;
}

/** The copy number for one more coexisting copy of a message. */
function nextCopy(siblings: EmailRow[]): number {
  const used = siblings.map((e) => Number(/#(\d+)$/.exec(e.identity)?.[1] ?? 1));
  return used.length ? Math.max(...used) + 1 : 1;
}

/** Decides a new email's rows (thread, search, membership, attachments, participants) into `made.rows`; returns them. */
async function storeNewEmail(
  state: SyncState,
  { message, raw, mail }: Arrival,
  made: {
    identity: string;
    folder: FolderRow;
    flags: FlagState;
    threader: Threader;
    now: string;
    /** The outgoing record when the API sent or saved this message (origin api, tracking, draft id). */
    sentByApi: OutgoingRecord | undefined;
    blobs: BlobWriter;
    rows: NewMailRows;
  },
  result: ChangeResult,
): Promise<{ row: EmailRow; attachments: AttachmentRow[]; content: StoredBodies }> {
  const { identity, folder, flags, threader, now, blobs } = made;
  const dateMs = mail.date_ms ?? (Date.parse(message.internal_date) || Date.now());
  const thread = await threader.assign(threadedMessage(mail, dateMs, message.gm_thrid));
  made.rows.merge(thread.statements);
  if (thread.merged.length) await threadMergeEvents(state, result, thread.merged, thread.threadId);
  const accountId = state.account.accountId;
  const { row, content } = await buildEmailRow(
    { mail, message, identity, folder, flags, threadId: thread.threadId, accountId, now },
    raw,
    blobs,
  );
  Object.assign(row, outgoingFields(row, made.sentByApi));
  const attachments = await attachmentRows(row, mail, blobs);
  made.rows.addEmail(row, mail, {
    attachments,
    membership: { folder_id: folder.id, uid: message.uid, seen: row.unread ? 0 : 1, flagged: row.starred },
    threadKeys: await threader.record(row.id, row.thread_id, threadedMessage(mail, row.date_ms, message.gm_thrid)),
  });
  return { row, attachments, content };
}

/** email.new (or email.draft.new) of a new email, and email.new.bounce when it is a bounce. */
function emitNew(state: SyncState, result: ChangeResult, record: EmailRecord, mail: ParsedMessage): void {
  const { row } = record;
  addEvent(state, result, row.is_draft ? 'email.draft.new' : 'email.new', emailEventData(record, mail));
  // A delay notice carries its bounce details too (action "delayed"): a warning, not a failure.
  if (mail.bounce?.action === 'failed') {
    addEvent(state, result, 'email.new.bounce', {
      email_id: row.id,
      original_message_id: mail.bounce.original_message_id,
      recipient: mail.bounce.recipient,
      status: mail.bounce.status,
      action: mail.bounce.action,
      diagnostic: mail.bounce.diagnostic,
    });
  }
}

/** Stored emails of threads merged into `threadId` changed their thread_id: one email.update each. */
async function threadMergeEvents(
  state: SyncState,
  result: ChangeResult,
  merged: string[],
  threadId: string,
): Promise<void> {
  const { results } = await state.env.DB.prepare(
    `SELECT * FROM emails WHERE account_id = ? AND thread_id IN (SELECT value FROM json_each(?)) ORDER BY date_ms LIMIT ${MAX_MERGE_EVENTS}`,
  )
    .bind(state.account.accountId, JSON.stringify(merged))
    .all<EmailRow>();
  for (const record of await loadEmailRecords(state.env, results)) {
    addEvent(state, result, 'email.update', emailEventData({ ...record, row: { ...record.row, thread_id: threadId } }));
  }
}
