/**
 * Where a folder stands when a pass begins (gateway/folder-pass.ts): its numbers (EXAMINE or STATUS)
 * and whether it may hold mail above the cursor.
 */
import type { ImapFlow } from 'imapflow';
import type { FolderCursor } from '../common/relay.ts';
import type { FolderStatus } from './folder-changes.ts';
import { STATUS_QUERY } from './imap.ts';

/** False when the folder's exact numbers show nothing above the baseline. */
export function mayHaveNewMail(status: FolderStatus, base: FolderCursor): boolean {
  return !status.exact || status.uidnext === 0 || status.uidnext > base.last_uid + 1;
}

/** Whether the folder has messages above the baseline (a UID SEARCH when STATUS may be behind). */
export async function hasNewMail(client: ImapFlow, status: FolderStatus, base: FolderCursor): Promise<boolean> {
  if (!mayHaveNewMail(status, base)) return false;
  if (status.exact && status.uidnext !== 0) return true;
  const uids = await client.search({ uid: `${base.last_uid + 1}:*` }, { uid: true });
  // "n:*" also matches the highest UID when it is below n.
  return Array.isArray(uids) && uids.some((uid) => uid > base.last_uid);
}

/**
 * State of the selected folder. Just selected: the EXAMINE answer. Selected for a while (an IDLE
 * connection): STATUS, then NOOP; STATUS is not trusted to be current (servers answer it for a
 * selected folder from the session's own view; Courier's stays stale): its numbers may only be
 * behind, so they may hold the cursor back (flags re-read, a gap not skipped) but never skip a
 * FETCH.
 */
export async function statusOf(client: ImapFlow, path: string, fresh: boolean): Promise<FolderStatus> {
  const mailbox = client.mailbox;
  if (fresh && mailbox && mailbox.path === path)
    return {
      uidvalidity: Number(mailbox.uidValidity),
      uidnext: mailbox.uidNext ?? 0,
      highest_modseq: mailbox.highestModseq !== undefined ? String(mailbox.highestModseq) : null,
      exact: true,
    };
  // STATUS first, then NOOP: the NOOP brings the session's view up to date where the server allows
  // (Dovecot: at once instead of at its notify timer), so the FETCH that follows sees at least what
  // the STATUS counted. The other way round, a message saved between the two was counted by STATUS
  // but not seen by the FETCH, and the cursor passed over it (lost mail, found by the soak).
  const st = await client.status(path, { ...STATUS_QUERY });
  if (!st) throw Object.assign(new Error(`STATUS failed for a folder`), { mailboxMissing: true });
  await client.noop();
  return {
    uidvalidity: Number(st.uidValidity ?? 0),
    uidnext: st.uidNext ?? 0,
    highest_modseq: st.highestModseq !== undefined ? String(st.highestModseq) : null,
    exact: false,
  };
}
