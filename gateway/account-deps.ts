/** What an account's sync is given by the gateway, shared by the retry loop and its sessions. */
import type { FolderCursor, InitialSyncPlan, MailboxConfig, OrphanState } from '../common/relay.ts';
import type { SyncSettings } from './config.ts';
import type { Logger } from './log.ts';
import type { Pacer } from './pacer.ts';
import type { WorkerClient } from './worker-client.ts';

export interface AccountDeps {
  worker: WorkerClient;
  settings: SyncSettings;
  log: Logger;
  /** Paces the accounts' background work behind new mail (gateway/pacer.ts); one per gateway. */
  pacer: Pacer;
  /** The Worker says the lease is gone: the account has stopped itself. */
  onLeaseLost(accountId: string): void;
}

export interface AccountLease {
  config: MailboxConfig;
  cursors: FolderCursor[];
  initial_sync?: InitialSyncPlan;
  orphans?: OrphanState;
}

/** The initial sync still to pull (gateway/initial-sync.ts); null once it ended. Kept across sessions. */
export interface PendingInitialSync {
  plan: InitialSyncPlan | null;
}
