/**
 * The account object's own SQLite storage: who the account is (meta), the lease, the folder
 * cursors, the initial sync's ranges, and messages that could not be applied. One place for the
 * schema and every read and write of it.
 */
import type { FolderCursor } from '../../common/relay.ts';
import type { AccountContext, CursorState } from '../sync/state.ts';
import { InitialSync, type InitialSyncStatus } from '../sync/initial-sync.ts';
import type { Lease } from './lease.ts';

export type FailedMessage = {
  path: string;
  uidvalidity: number;
  uid: number;
  attempts: number;
  first_failed_at: number;
  reason: string;
  /** 1 once the message was given up on: the folder moved past it. */
  skipped: number;
};

export class AccountStore {
  private readonly storage: DurableObjectStorage;

  constructor(storage: DurableObjectStorage) {
    this.storage = storage;
  }

  private get sql(): SqlStorage {
    return this.storage.sql;
  }

  migrate(): void {
    this.sql.exec(`
      CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS lease (
        singleton  INTEGER PRIMARY KEY CHECK (singleton = 1),
        gateway_id TEXT NOT NULL
      );
      CREATE TABLE IF NOT EXISTS folder_cursors (
        path            TEXT PRIMARY KEY,
        uidvalidity     INTEGER NOT NULL,
        last_uid        INTEGER NOT NULL,
        highest_modseq  TEXT,
        resync          INTEGER NOT NULL DEFAULT 0
      );
      CREATE TABLE IF NOT EXISTS initial_sync_folders (path TEXT PRIMARY KEY, uidvalidity INTEGER NOT NULL, below_uid INTEGER NOT NULL);
      CREATE TABLE IF NOT EXISTS failed_messages (
        path TEXT NOT NULL, uidvalidity INTEGER NOT NULL, uid INTEGER NOT NULL,
        attempts INTEGER NOT NULL, first_failed_at INTEGER NOT NULL, reason TEXT NOT NULL,
        skipped INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (path, uidvalidity, uid)
      );
      DROP TABLE IF EXISTS orphans;
    `);
    // How long a lease lasts is D1's to say, from its holder's heartbeat (durable/lease.ts).
    if (
      this.sql
        .exec<{ name: string }>('PRAGMA table_info(lease)')
        .toArray()
        .some((c) => c.name === 'expires_at')
    )
      this.sql.exec('ALTER TABLE lease DROP COLUMN expires_at');
    const columns = this.sql.exec<{ name: string }>('PRAGMA table_info(folder_cursors)').toArray();
    if (!columns.some((c) => c.name === 'missing'))
      this.sql.exec('ALTER TABLE folder_cursors ADD COLUMN missing INTEGER NOT NULL DEFAULT 0');
    if (!columns.some((c) => c.name === 'passed'))
      this.sql.exec('ALTER TABLE folder_cursors ADD COLUMN passed INTEGER NOT NULL DEFAULT 0');
    if (!columns.some((c) => c.name === 'resync_to'))
      this.sql.exec('ALTER TABLE folder_cursors ADD COLUMN resync_to INTEGER NOT NULL DEFAULT 0');
  }

  /** Forget everything (a new connect of the account). */
  reset(): void {
    for (const table of ['meta', 'folder_cursors', 'initial_sync_folders', 'lease', 'failed_messages'])
      this.sql.exec(`DELETE FROM ${table}`);
  }

  /** Forget the sync state of a removed account (its meta stays, marked removed). */
  forgetSync(): void {
    for (const table of ['folder_cursors', 'initial_sync_folders', 'failed_messages'])
      this.sql.exec(`DELETE FROM ${table}`);
  }

  meta(key: string): string | null {
    const row = this.sql.exec<{ value: string }>('SELECT value FROM meta WHERE key = ?', key).toArray()[0];
    return row?.value ?? null;
  }

  setMeta(key: string, value: string): void {
    this.sql.exec('INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)', key, value);
  }

  // ------------------------------------------------------------------ lease

  lease(): Lease | null {
    return this.sql.exec<{ gateway_id: string }>('SELECT gateway_id FROM lease').toArray()[0] ?? null;
  }

  setLease(lease: Lease): void {
    this.sql.exec('INSERT OR REPLACE INTO lease (singleton, gateway_id) VALUES (1, ?)', lease.gateway_id);
  }

  dropLease(gatewayId?: string): void {
    if (gatewayId === undefined) this.sql.exec('DELETE FROM lease');
    else this.sql.exec('DELETE FROM lease WHERE gateway_id = ?', gatewayId);
  }

  /** Who the account is, for applying its changes; throws once it is removed (or before it is connected). */
  accountContext(): AccountContext {
    const accountId = this.meta('account_id');
    if (!accountId || this.meta('removed') === '1') throw new Error('account_gone: this account is not connected');
    const own = new Set(
      [this.meta('email'), this.meta('user_id')]
        .filter((v): v is string => !!v && v.includes('@'))
        .map((v) => v.toLowerCase()),
    );
    return { accountId, ownAddresses: own, connectedAtMs: Number(this.meta('connected_at_ms') ?? 0) };
  }

  // ------------------------------------------------------------------ cursors

  loadCursors(): Map<string, CursorState> {
    const rows = this.sql
      .exec<{
        path: string;
        uidvalidity: number;
        last_uid: number;
        highest_modseq: string | null;
        resync: number;
        resync_to: number;
        missing: number;
        passed: number;
      }>('SELECT * FROM folder_cursors')
      .toArray();
    return new Map(rows.map((r) => [r.path, { ...r, resync: r.resync === 1 }]));
  }

  /** The cursors as the gateway is told them (common/relay.ts `FolderCursor`). */
  folderCursors(): FolderCursor[] {
    return [...this.loadCursors().values()].map(({ path, uidvalidity, last_uid, highest_modseq, resync }) => ({
      path,
      uidvalidity,
      last_uid,
      highest_modseq,
      ...(resync && { resync: true }),
    }));
  }

  saveCursors(cursors: Map<string, CursorState>): void {
    this.storage.transactionSync(() => {
      this.sql.exec('DELETE FROM folder_cursors');
      for (const c of cursors.values()) {
        this.sql.exec(
          'INSERT INTO folder_cursors (path, uidvalidity, last_uid, highest_modseq, resync, resync_to, missing, passed) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
          c.path,
          c.uidvalidity,
          c.last_uid,
          c.highest_modseq,
          c.resync ? 1 : 0,
          c.resync_to,
          c.missing,
          c.passed,
        );
      }
    });
  }

  // ------------------------------------------------------------------ orphans (worker/sync/orphans.ts)

  /** The mark of the latest batch that left emails in no folder (set on first use above every earlier mark). */
  orphanMark(): number {
    const stored = this.meta('orphan_mark');
    if (stored !== null) return Number(stored);
    // Emails marked before marks were kept carry the time they left: every one is below now.
    const now = Date.now();
    this.setMeta('orphan_mark', String(now));
    return now;
  }

  /** The mark for the next batch: above every mark told so far. */
  nextOrphanMark(): number {
    return Math.max(Date.now(), this.orphanMark() + 1);
  }

  setOrphanMark(mark: number): void {
    if (mark > this.orphanMark()) this.setMeta('orphan_mark', String(mark));
  }

  listedMark(): number {
    return Number(this.meta('listed_mark') ?? 0);
  }

  setListedMark(mark: number): void {
    if (mark > this.listedMark()) this.setMeta('listed_mark', String(mark));
  }

  /** Whether some email of the account is in no folder (null: not known yet to this object). */
  orphansWaiting(): boolean | null {
    const value = this.meta('orphans_waiting');
    return value === null ? null : value === '1';
  }

  setOrphansWaiting(waiting: boolean): void {
    this.setMeta('orphans_waiting', waiting ? '1' : '0');
  }

  // ------------------------------------------------------------------ initial sync (worker/sync/initial-sync.ts)

  loadInitialSync(): InitialSync | null {
    const since = this.meta('initial_sync_since_ms');
    if (since === null) return null;
    const rows = this.sql
      .exec<{ path: string; uidvalidity: number; below_uid: number }>('SELECT * FROM initial_sync_folders')
      .toArray();
    const status = (this.meta('initial_sync_status') ?? 'pending') as InitialSyncStatus;
    return new InitialSync(
      Number(since),
      status,
      new Map(rows.map((r) => [r.path, { uidvalidity: r.uidvalidity, below_uid: r.below_uid }])),
    );
  }

  saveInitialSync(sync: InitialSync): void {
    this.storage.transactionSync(() => {
      this.setMeta('initial_sync_since_ms', String(sync.sinceMs));
      this.setMeta('initial_sync_status', sync.status);
      this.sql.exec('DELETE FROM initial_sync_folders');
      for (const [path, f] of sync.folders) {
        this.sql.exec(
          'INSERT INTO initial_sync_folders (path, uidvalidity, below_uid) VALUES (?, ?, ?)',
          path,
          f.uidvalidity,
          f.below_uid,
        );
      }
    });
  }

  // ------------------------------------------------------------------ messages that could not be applied

  /** Counts one more failed attempt at a message; returns its record. */
  recordFailure(path: string, uidvalidity: number, uid: number, reason: string, now: number): FailedMessage {
    this.sql.exec(
      `INSERT INTO failed_messages (path, uidvalidity, uid, attempts, first_failed_at, reason) VALUES (?, ?, ?, 1, ?, ?)
       ON CONFLICT (path, uidvalidity, uid) DO UPDATE SET attempts = attempts + 1, reason = excluded.reason`,
      path,
      uidvalidity,
      uid,
      now,
      reason,
    );
    return this.sql
      .exec<FailedMessage>(
        'SELECT * FROM failed_messages WHERE path = ? AND uidvalidity = ? AND uid = ?',
        path,
        uidvalidity,
        uid,
      )
      .toArray()[0]!;
  }

  markSkipped(path: string, uidvalidity: number, uid: number): void {
    this.sql.exec(
      'UPDATE failed_messages SET skipped = 1 WHERE path = ? AND uidvalidity = ? AND uid = ?',
      path,
      uidvalidity,
      uid,
    );
  }

  /** A message that failed before went through after all. */
  clearFailure(path: string, uidvalidity: number, uid: number): void {
    this.sql.exec('DELETE FROM failed_messages WHERE path = ? AND uidvalidity = ? AND uid = ?', path, uidvalidity, uid);
  }
}
