/**
 * The initial sync's pull (common/relay.ts `InitialSyncPlan`): the mail each folder held before the
 * account connected (UIDs below `below_uid`) whose INTERNALDATE is inside the window, highest UID
 * (newest arrival) first, in pages of at most MAX_BATCH_MESSAGES / MAX_BATCH_BYTES, each relayed as
 * one `messages` change flagged `initial_sync`. The Worker lowers the folder's `below_uid` with every
 * applied page, so a restarted gateway resumes where the last acknowledged page ended; a page sent
 * twice is harmless (known (folder, UID) are skipped).
 *
 * It runs on the account's command connection, one page per turn, so the live sync's passes and the
 * mailbox commands go on in between. A command the server refuses ends it as `failed`; a dropped
 * connection ends the session, and the next session resumes it.
 */
import type { ImapFlow } from 'imapflow';
import { MAX_BATCH_BYTES, MAX_BATCH_MESSAGES } from '../common/relay-limits.ts';
import type { Change, FolderInfo, InitialSyncPlan, MessageIn } from '../common/relay.ts';
import { isSelectable } from './imap.ts';
import type { Logger } from './log.ts';
import {
  hasSource,
  hasUid,
  internalDateOf,
  MESSAGE_OVERHEAD_BYTES,
  messageQuery,
  OMITTED_HEAD_BYTES,
  toOmitted,
  toRelayed,
  type StageSource,
} from './messages.ts';

const DAY_MS = 24 * 3600 * 1000;

export interface PullDeps {
  /** Runs work in a turn of the command connection (gateway/command-connection.ts). */
  turn<T>(work: (client: ImapFlow) => Promise<T>): Promise<T>;
  /** Stores a large source with the Worker ahead of its change. */
  stage: StageSource;
  /** Messages larger than this are relayed without their body (gateway/fetch-new.ts). */
  maxMessageBytes: number;
  gmail: boolean;
  listing: Map<string, FolderInfo>;
  /** Relays changes; the live sync's cursors are not touched by them. */
  send(changes: Change[]): Promise<void>;
  log: Logger;
}

type PlanFolder = InitialSyncPlan['folders'][number];

/** Runs the pull to its end and reports it; `plan` follows the acknowledged progress. */
export async function pullInitialSync(plan: InitialSyncPlan, deps: PullDeps): Promise<void> {
  const since = Date.parse(plan.since);
  await deps.send([{ type: 'initial_sync', state: 'running', error: null }]);
  let pulled = 0;
  try {
    for (const folder of plan.folders) {
      const info = deps.listing.get(folder.path);
      if (!info || !isSelectable(info) || info.uidvalidity !== folder.uidvalidity || folder.below_uid <= 1) continue;
      pulled += await pullFolder(folder, since, deps);
    }
  } catch (err) {
    const refused = (err as { responseStatus?: string }).responseStatus;
    if (refused !== 'NO' && refused !== 'BAD') throw err;
    const reason = `the server refused a command of the initial sync (${refused})`;
    deps.log.warn('initial sync failed', { reason });
    await deps.send([{ type: 'initial_sync', state: 'failed', error: reason }]);
    return;
  }
  deps.log.info('initial sync completed', { messages: pulled });
  await deps.send([{ type: 'initial_sync', state: 'completed', error: null }]);
}

async function pullFolder(folder: PlanFolder, since: number, deps: PullDeps): Promise<number> {
  const inWindow = await deps.turn((client) => inWindowOf(client, folder, since));
  if (!inWindow) return 0;
  inWindow.sort((a, b) => b.uid - a.uid);
  const tooLarge = new Set(inWindow.filter((m) => m.size > deps.maxMessageBytes).map((m) => m.uid));
  for (const page of pages(inWindow)) {
    // A message over the limit goes alone (pages), fetched only up to its head.
    const omitted = page.length === 1 && tooLarge.has(page[0]!);
    const query = omitted
      ? { ...messageQuery(deps.gmail), source: { start: 0, maxLength: OMITTED_HEAD_BYTES } }
      : messageQuery(deps.gmail);
    const messages = await deps.turn(async (client) => {
      const lock = await client.getMailboxLock(folder.path, { readOnly: true });
      try {
        if (!sameNumbering(client, folder)) return null;
        const fetched: MessageIn[] = [];
        for await (const msg of client.fetch(uidSet(page), query, { uid: true })) {
          if (!hasUid(msg)) continue;
          // Most likely expunged while it was read: older mail the live sync does not pick up again.
          if (!hasSource(msg))
            deps.log.warn('initial sync: message fetched without its source, left out', {
              path: folder.path,
              uid: msg.uid,
            });
          else fetched.push(omitted ? toOmitted(msg, deps.gmail) : await toRelayed(msg, deps.gmail, deps.stage));
        }
        return fetched;
      } finally {
        lock.release();
      }
    });
    if (!messages) return 0;
    messages.sort((a, b) => b.uid - a.uid);
    if (messages.length)
      await deps.send([
        { type: 'messages', path: folder.path, uidvalidity: folder.uidvalidity, messages, initial_sync: true },
      ]);
    folder.below_uid = Math.min(folder.below_uid, ...page);
  }
  return inWindow.length;
}

/** The folder was renumbered since the plan was made: its old UIDs mean nothing any more. */
function sameNumbering(client: ImapFlow, folder: PlanFolder): boolean {
  return !client.mailbox || Number(client.mailbox.uidValidity) === folder.uidvalidity;
}

/** The UIDs (and sizes) below `below_uid` whose INTERNALDATE is inside the window; null when renumbered. */
async function inWindowOf(
  client: ImapFlow,
  folder: PlanFolder,
  since: number,
): Promise<{ uid: number; size: number }[] | null> {
  const lock = await client.getMailboxLock(folder.path, { readOnly: true });
  try {
    if (!sameNumbering(client, folder)) return null;
    const below = folder.below_uid;
    // SEARCH SINCE compares dates only (in the server's zone): a day earlier is a superset; INTERNALDATE decides.
    const candidates = (
      (await client.search({ uid: `1:${below - 1}`, since: new Date(since - DAY_MS) }, { uid: true })) || []
    ).filter((uid) => uid < below);
    if (!candidates.length) return [];
    const inWindow: { uid: number; size: number }[] = [];
    for await (const msg of client.fetch(
      uidSet(candidates),
      { uid: true, internalDate: true, size: true },
      { uid: true },
    )) {
      if (hasUid(msg) && msg.uid < below && internalDateOf(msg).getTime() >= since)
        inWindow.push({ uid: msg.uid, size: msg.size ?? 0 });
    }
    return inWindow;
  } finally {
    lock.release();
  }
}

/** Consecutive runs of the (descending) list that fit one change batch; a message over the byte limit goes alone. */
function pages(messages: { uid: number; size: number }[]): number[][] {
  const out: number[][] = [];
  let page: number[] = [];
  let bytes = 0;
  for (const { uid, size } of messages) {
    // base64 grows the source by a third.
    const estimate = Math.ceil(size / 3) * 4 + MESSAGE_OVERHEAD_BYTES;
    if (page.length && (page.length >= MAX_BATCH_MESSAGES || bytes + estimate > MAX_BATCH_BYTES)) {
      out.push(page);
      page = [];
      bytes = 0;
    }
    page.push(uid);
    bytes += estimate;
  }
  if (page.length) out.push(page);
  return out;
}

/** An IMAP UID set with runs collapsed ("3:7,9"), so long lists stay short on the wire. */
export function uidSet(uids: number[]): string {
  const sorted = [...new Set(uids)].sort((a, b) => a - b);
  const parts: string[] = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j]! + 1) j++;
    parts.push(i === j ? String(sorted[i]) : `${sorted[i]}:${sorted[j]}`);
    i = j + 1;
  }
  return parts.join(',');
}
