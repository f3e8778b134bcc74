/**
 * The initial sync's pull (common/relay.ts `InitialSyncPlan`): the mail each folder held before the
 * account connected (UIDs below `below_uid`) whose INTERNALDATE is inside the window, highest UID
 * (newest arrival) first, in pages of at most MAX_BATCH_MESSAGES / MAX_BATCH_BYTES, each relayed as
 * one `messages` change flagged `initial_sync`. The Worker lowers the folder's `below_uid` with every
 * applied page, so a restarted gateway resumes where the last acknowledged page ended; a page sent
 * twice is harmless (known (folder, UID) are skipped).
 *
 * It runs on a connection of its own beside the live sync, which keeps relaying new mail meanwhile.
 * A command the server refuses ends it as `failed`; a dropped connection ends the session, and the
 * next session resumes it.
 */
import type { ImapFlow } from 'imapflow';
import {
  MAX_BATCH_BYTES,
  MAX_BATCH_MESSAGES,
  type Change,
  type FolderInfo,
  type InitialSyncPlan,
  type MessageIn,
} from '../common/relay.ts';
import { isSelectable } from './imap.ts';
import type { Logger } from './log.ts';
import {
  hasUid,
  internalDateOf,
  MESSAGE_OVERHEAD_BYTES,
  messageQuery,
  toRelayed,
  type StageSource,
} from './messages.ts';

const DAY_MS = 24 * 3600 * 1000;

export interface PullDeps {
  client: ImapFlow;
  /** Stores a large source with the Worker ahead of its change. */
  stage: StageSource;
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
  const { client } = deps;
  const lock = await client.getMailboxLock(folder.path, { readOnly: true });
  try {
    if (client.mailbox && Number(client.mailbox.uidValidity) !== folder.uidvalidity) return 0;
    const below = folder.below_uid;
    // SEARCH SINCE compares dates only (in the server's zone): a day earlier is a superset; INTERNALDATE decides.
    const candidates = (
      (await client.search({ uid: `1:${below - 1}`, since: new Date(since - DAY_MS) }, { uid: true })) || []
    ).filter((uid) => uid < below);
    if (!candidates.length) return 0;
    const inWindow: { uid: number; size: number }[] = [];
    for await (const msg of client.fetch(
      uidSet(candidates),
      { uid: true, internalDate: true, size: true },
      { uid: true },
    )) {
      if (hasUid(msg) && msg.uid < below && internalDateOf(msg).getTime() >= since)
        inWindow.push({ uid: msg.uid, size: msg.size ?? 0 });
    }
    inWindow.sort((a, b) => b.uid - a.uid);
    // One page travels to the Worker while the next is fetched (as the live sync does); sends stay in order.
    let inFlight: Promise<void> = Promise.resolve();
    try {
      for (const page of pages(inWindow)) {
        const messages: MessageIn[] = [];
        for await (const msg of client.fetch(uidSet(page), messageQuery(deps.gmail), { uid: true }))
          if (hasUid(msg)) messages.push(await toRelayed(msg, deps.gmail, deps.stage));
        messages.sort((a, b) => b.uid - a.uid);
        await inFlight;
        const lowest = Math.min(...page);
        const change: Change = {
          type: 'messages',
          path: folder.path,
          uidvalidity: folder.uidvalidity,
          messages,
          initial_sync: true,
        };
        inFlight = (messages.length ? deps.send([change]) : Promise.resolve()).then(() => {
          folder.below_uid = Math.min(folder.below_uid, lowest);
        });
      }
      await inFlight;
    } catch (err) {
      inFlight.catch(() => undefined); // the loop's own error is the one to report
      throw err;
    }
    return inWindow.length;
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
