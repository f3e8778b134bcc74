/**
 * What applying a change works on and what it produces: the account, its cursors and folders (the
 * state every part of worker/sync/ shares), and the ChangeResult the account's object commits.
 */
import type { MessageIn } from '../../common/relay.ts';
import type { Env } from '../env.ts';
import { newEvent, type OutboxEvent } from '../events/outbox.ts';
import type { EventType } from '../events/types.ts';
import type { FolderRow } from '../folders/present.ts';
import type { InitialSync } from './initial-sync.ts';
import type { PreparedMessage } from './prepare.ts';
import type { SyncStats } from './stats.ts';

/** Where sync stands in one folder; `resync` is set while a folder is re-read after a UIDVALIDITY change. */
export interface CursorState {
  path: string;
  uidvalidity: number;
  last_uid: number;
  highest_modseq: string | null;
  resync: boolean;
  /**
   * While `resync`: the folder's last UID when the re-read began (its UIDNEXT then, less one). The
   * re-read ends only with a cursor at or above it: everything the folder held then was read again.
   */
  resync_to: number;
  /** Consecutive folder listings that did not include this folder (deleted only when confirmed). */
  missing: number;
  /**
   * The orphan mark at the start of the latest pass that read the folder through under this
   * UIDVALIDITY (sync/orphans.ts): emails marked up to it cannot be waiting for this folder.
   */
  passed: number;
}

export interface AccountContext {
  accountId: string;
  /** Lower-cased addresses of the account itself (left out of contacts). */
  ownAddresses: Set<string>;
  /** When the account connected: a re-read folder ignores mail that arrived before. */
  connectedAtMs: number;
}

/** The state one ChangeApplier holds while it applies a batch of changes. */
export interface SyncState {
  env: Env;
  account: AccountContext;
  cursors: Map<string, CursorState>;
  /** The account's folders by provider path. */
  folders: Map<string, FolderRow>;
  initialSync: InitialSync | null;
  /** What applying costs (logged per batch, summed by the sync bench). */
  stats?: SyncStats;
  /**
   * The mark this batch gives the emails it leaves in no folder (sync/orphans.ts): above every mark
   * the gateway has been told, so no pass it began before can count as evidence for them.
   */
  orphanMark: number;
  /** The mark when the gateway's latest folder listing began (from its `passed` reports). */
  listedMark: number;
  /** Sources the changes endpoint already parsed (sync/prepare.ts); the others are parsed here. */
  prepared?: WeakMap<MessageIn, PreparedMessage>;
}

/** What applying one change produced; the Durable Object commits it. */
export interface ChangeResult {
  statements: D1PreparedStatement[];
  /** Events of the change, in order; commit writes their outbox rows in bulk beside their statements. */
  events: OutboxEvent[];
  /** For each event, `statements.length` when it was added: its rows go in the D1 batch of that unit. */
  eventMarks: number[];
  /** R2 objects to write before the D1 batch. */
  blobs: { key: string; body: Uint8Array | string; contentType: string }[];
  /** Staged sources this change did not make an email of: the object deletes them after a grace (durable/staged-releases.ts). */
  unusedStaged: string[];
  /** This change may leave emails in no folder (marked in D1 in the same batch): the object sets its alarm. */
  orphaned: boolean;
  /** This change queued departures (sync/departures.ts): the object sets its alarm. */
  departed: boolean;
  /**
   * Indexes into `statements` where a unit (one message or one email with its event) ends. A change
   * too big for one D1 batch is only ever cut there, so no message is half written with its event
   * missing: a retry skips the committed ones and writes the rest whole.
   */
  unitEnds: number[];
  /** Statements on the account's directory row (accounts, in DB): written before the mail's batches. */
  directory: D1PreparedStatement[];
}

export const emptyResult = (): ChangeResult => ({
  statements: [],
  events: [],
  eventMarks: [],
  blobs: [],
  unusedStaged: [],
  orphaned: false,
  departed: false,
  unitEnds: [],
  directory: [],
});

export const endUnit = (result: ChangeResult): void => void result.unitEnds.push(result.statements.length);

/** An event of this account, written in the change's batch (with the statements before it). */
export function addEvent(state: SyncState, result: ChangeResult, type: EventType, data: unknown): void {
  pushEvent(result, newEvent(type, state.account.accountId, data));
}

export function pushEvent(result: ChangeResult, event: OutboxEvent): void {
  result.events.push(event);
  result.eventMarks.push(result.statements.length);
}
