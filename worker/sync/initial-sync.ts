/**
 * The initial sync (POST /auth/intent `initial_sync_enable` + `initial_sync_days`): mail that was in
 * the mailbox before the account connected and arrived (INTERNALDATE) within the window enters the
 * API too. The account's Durable Object keeps this state next to the folder cursors; the gateway
 * learns what is left from the lease (`InitialSyncPlan`), pulls it newest first in pages (`messages`
 * changes flagged `initial_sync`) and reports `running`, then `completed` or `failed` (an
 * `initial_sync` change). Each move of the account's `initial_sync` field is written with its event
 * in one D1 batch.
 *
 * Status: `pending` (asked for, no gateway started yet; the account shows "none"), `running`,
 * `completed`, `failed`.
 */
import type { InitialSyncPlan, MessageIn } from '../../common/relay.ts';
import { ACCOUNT_COLUMNS, presentAccount, type AccountRow } from '../accounts/present.ts';
import { newEvent, type OutboxEvent } from '../events/outbox.ts';
import { isoNow } from '../lib/time.ts';

export type InitialSyncStatus = 'pending' | 'running' | 'completed' | 'failed';

export interface InitialSyncFolder {
  uidvalidity: number;
  /** UIDs below this one are still to pull (at first: the folder's UIDNEXT when the account connected). */
  below_uid: number;
}

export class InitialSync {
  sinceMs: number;
  status: InitialSyncStatus;
  readonly folders: Map<string, InitialSyncFolder>;

  constructor(sinceMs: number, status: InitialSyncStatus, folders: Map<string, InitialSyncFolder>) {
    this.sinceMs = sinceMs;
    this.status = status;
    this.folders = folders;
  }

  /** What the gateway still has to do, or undefined once the sync is over. */
  plan(): InitialSyncPlan | undefined {
    if (this.status !== 'pending' && this.status !== 'running') return undefined;
    return {
      since: new Date(this.sinceMs).toISOString(),
      folders: [...this.folders].map(([path, f]) => ({ path, uidvalidity: f.uidvalidity, below_uid: f.below_uid })),
    };
  }

  /** Whether an older message the gateway pulled belongs in the API: inside the window, below the connect baseline. */
  accepts(path: string, uidvalidity: number, message: MessageIn): boolean {
    const folder = this.folders.get(path);
    if (!this.plan() || !folder || folder.uidvalidity !== uidvalidity) return false;
    return message.uid < folder.below_uid && Date.parse(message.internal_date) >= this.sinceMs;
  }

  /** A page was applied: its folder's remaining range ends below its lowest UID. */
  pulled(path: string, uidvalidity: number, uids: number[]): void {
    const folder = this.folders.get(path);
    if (folder && folder.uidvalidity === uidvalidity && uids.length)
      folder.below_uid = Math.min(folder.below_uid, ...uids);
  }

  /**
   * The gateway reports progress: pending → running → completed | failed; anything else (a repeated
   * `running` after a gateway restart, a late report) changes nothing. Returns the account row's
   * update and its event (its outbox row is written with the change), or null.
   */
  async advance(
    db: D1Database,
    accountId: string,
    next: Exclude<InitialSyncStatus, 'pending'>,
    error: string | null,
  ): Promise<{ statement: D1PreparedStatement; event: OutboxEvent } | null> {
    const allowed = next === 'running' ? this.status === 'pending' : this.status === 'running';
    if (!allowed) return null;
    const row = await db
      .prepare(`SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE id = ?`)
      .bind(accountId)
      .first<AccountRow>();
    if (!row) return null;
    if (error) console.warn(`initial sync of ${accountId} failed: ${error}`);
    this.status = next;
    const event = newEvent(`account.initial_sync.${next}`, accountId, presentAccount({ ...row, initial_sync: next }));
    return {
      statement: db
        .prepare('UPDATE accounts SET initial_sync = ?, updated_at = ? WHERE id = ?')
        .bind(next, isoNow(), accountId),
      event,
    };
  }
}
