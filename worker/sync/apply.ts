/**
 * Applying the gateway's changes to D1 and R2. Each change becomes one D1 batch (one transaction)
 * holding the rows it touches and the outbox rows of its events; blobs go to R2 first, under keys
 * derived from the message's identity, so a retried change rewrites the same objects. Every change
 * is idempotent: a (folder, UID) already known is skipped, and events are only written for what
 * actually changed. The caller (the account's Durable Object) runs changes one at a time.
 *
 * One module per concern: folders.ts (the listing), messages.ts (new mail), memberships.ts (flags,
 * expunges, snapshots, stale memberships), orphans.ts (emails left in no folder).
 */
import type { Change } from '../../common/relay.ts';
import type { Env } from '../env.ts';
import type { FolderRow } from '../folders/present.ts';
import { applyFolders } from './folders.ts';
import type { InitialSync } from './initial-sync.ts';
import { applyFlags, applySnapshot, applyVanished, detachStale } from './memberships.ts';
import { applyMessages } from './messages.ts';
import { folderProblem } from './problems.ts';
import type { SyncStats } from './stats.ts';
import {
  emptyResult,
  pushEvent,
  type AccountContext,
  type ChangeResult,
  type CursorState,
  type SyncState,
} from './state.ts';
import { directoryDb } from '../shards/registry.ts';

export class ChangeApplier {
  readonly state: SyncState;

  constructor(
    env: Env,
    account: AccountContext,
    cursors: Map<string, CursorState>,
    initialSync: InitialSync | null = null,
    stats?: SyncStats,
  ) {
    this.state = {
      env,
      account,
      cursors,
      folders: new Map(),
      initialSync,
      orphanMark: 0,
      listedMark: 0,
      ...(stats && { stats }),
    };
  }

  get cursors(): Map<string, CursorState> {
    return this.state.cursors;
  }

  /** The account's initial sync, when one was asked for (the caller saves it with the cursors). */
  get initialSync(): InitialSync | null {
    return this.state.initialSync;
  }

  async loadFolders(): Promise<void> {
    const { results } = await this.state.env.DB.prepare('SELECT * FROM folders WHERE account_id = ?')
      .bind(this.state.account.accountId)
      .all<FolderRow>();
    this.state.folders = new Map(results.map((f) => [f.provider_id, f]));
  }

  applyFolders(listing: Parameters<typeof applyFolders>[1], options: { baseline: boolean }): Promise<ChangeResult> {
    return applyFolders(this.state, listing, options);
  }

  async apply(change: Change): Promise<ChangeResult> {
    const state = this.state;
    switch (change.type) {
      case 'folders':
        return applyFolders(state, change.folders, { baseline: false });
      case 'messages':
        return applyMessages(state, change.path, change.uidvalidity, change.messages, {
          initial: change.initial_sync === true,
          vanishing: change.vanishing ?? [],
        });
      case 'flags':
        return applyFlags(state, change.path, change.uidvalidity, change.updates);
      case 'vanished':
        return applyVanished(state, change.path, change.uidvalidity, change.uids);
      case 'snapshot':
        return applySnapshot(state, change.path, change.uidvalidity, change.uids, {
          ...(change.from_uid !== undefined && { fromUid: change.from_uid }),
          ...(change.up_to !== undefined && { upTo: change.up_to }),
        });
      case 'initial_sync': {
        const result = emptyResult();
        const moved = await state.initialSync?.advance(
          directoryDb(state.env),
          state.account.accountId,
          change.state,
          change.error,
        );
        if (moved) {
          result.directory.push(moved.statement);
          pushEvent(result, moved.event);
        }
        return result;
      }
      case 'cursor':
        return this.advanceCursor(change);
      case 'passed':
        this.recordPass(change);
        return emptyResult();
      case 'folder_problem':
        return folderProblem(state, change.path, change.problem);
    }
  }

  /**
   * A pass read the folder through (sync/orphans.ts). A mark is only ever told to the gateway once
   * stored, and this batch's own mark is above every stored one: `started` never claims more.
   */
  private recordPass(change: Extract<Change, { type: 'passed' }>): void {
    const state = this.state;
    const told = state.orphanMark - 1;
    for (const pass of change.folders) {
      const cursor = state.cursors.get(pass.path);
      if (cursor && cursor.uidvalidity === pass.uidvalidity)
        cursor.passed = Math.max(cursor.passed, Math.min(pass.started, told));
    }
    state.listedMark = Math.max(state.listedMark, Math.min(change.listed, told));
  }

  /**
   * Everything up to the cursor was reported. When that ends the re-read of a renumbered folder
   * (the cursor reaches `resync_to`), the memberships it did not find again are gone (their emails get email.update or are orphaned).
   */
  private async advanceCursor(change: Extract<Change, { type: 'cursor' }>): Promise<ChangeResult> {
    const result = emptyResult();
    const cursor = this.state.cursors.get(change.path);
    if (!cursor || cursor.uidvalidity !== change.uidvalidity) return result;
    cursor.last_uid = Math.max(cursor.last_uid, change.last_uid);
    cursor.highest_modseq = change.highest_modseq;
    // A re-read ends once the folder was read up to where it ended when the re-read began.
    if (cursor.resync && cursor.last_uid >= cursor.resync_to) {
      const folder = this.state.folders.get(change.path);
      if (folder) detachStale(this.state, folder, result);
      cursor.resync = false;
    }
    return result;
  }
}
