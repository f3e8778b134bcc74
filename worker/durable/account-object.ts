/**
 * One Durable Object per account (named by the account id): the owner of that account's sync
 * state (per folder UIDVALIDITY, last UID, HIGHESTMODSEQ), of the lease that says which gateway
 * holds the account, and of the order in which the account's changes are applied. Native RPC;
 * state in the object's SQLite storage.
 */
import { DurableObject } from 'cloudflare:workers';
import {
  ModifyResult,
  OutgoingResult,
  type AccountStatus,
  type Change,
  type FolderCursor,
  type FolderInfo,
  type GatewayRequest,
} from '../../common/relay.ts';
import { ACCOUNT_COLUMNS, presentAccount, type AccountRow } from '../accounts/present.ts';
import type { Env } from '../env.ts';
import { dispatchEvents, eventStatement, newEvent, type OutboxEvent } from '../events/outbox.ts';
import { emailEventData } from '../emails/events.ts';
import type { EmailRow } from '../emails/present.ts';
import { blobKeys, loadEmailRecords } from '../emails/store.ts';
import { isoNow } from '../lib/time.ts';
import { ChangeApplier, type ChangeResult, type CursorState } from '../sync/apply.ts';
import { InitialSync, type InitialSyncStatus } from '../sync/initial-sync.ts';
import { answerOf, callHolder, COMMAND_BUDGET, type CommandAnswer } from '../commands/holder.ts';
import { applyModify, planModify, type ModifyWanted } from '../commands/modify.ts';
import { notFound } from '../lib/errors.ts';
import { LEASE_TTL_MS, type HolderResult, type Lease } from './lease.ts';

/** An email expunged from its last folder waits this long for its other side of a move to arrive. */
const ORPHAN_GRACE_MS = 1_500;

export interface AccountInit {
  account_id: string;
  email: string;
  user_id: string;
  connected_at_ms: number;
  /** The folder listing taken while connecting: the baseline of "mail after connect". */
  folders: FolderInfo[];
  /** Initial sync asked for: mail that arrived from this instant on, before connect, is pulled too. */
  initial_sync_since_ms?: number | null;
}

export class AccountObject extends DurableObject<Env> {
  private readonly sql: SqlStorage;
  /** Changes of one account are applied strictly one after another. */
  private tail: Promise<unknown> = Promise.resolve();
  /** Commands (send, mailbox actions) run one after another too, on a chain of their own: a slow send never holds up sync. */
  private commandTail: Promise<unknown> = Promise.resolve();

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    ctx.blockConcurrencyWhile(async () => this.migrate());
  }

  private migrate(): void {
    this.sql.exec(`
      CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS lease (
        singleton  INTEGER PRIMARY KEY CHECK (singleton = 1),
        gateway_id TEXT NOT NULL,
        expires_at INTEGER NOT NULL
      );
      CREATE TABLE IF NOT EXISTS folder_cursors (
        path            TEXT PRIMARY KEY,
        uidvalidity     INTEGER NOT NULL,
        last_uid        INTEGER NOT NULL,
        highest_modseq  TEXT,
        resync          INTEGER NOT NULL DEFAULT 0
      );
      CREATE TABLE IF NOT EXISTS orphans (email_id TEXT PRIMARY KEY, due_at INTEGER NOT NULL);
      CREATE TABLE IF NOT EXISTS initial_sync_folders (path TEXT PRIMARY KEY, uidvalidity INTEGER NOT NULL, below_uid INTEGER NOT NULL);
    `);
  }

  private serialize<T>(work: () => Promise<T>): Promise<T> {
    const run = this.tail.then(work, work);
    this.tail = run.catch(() => undefined);
    return run;
  }

  // ------------------------------------------------------------------ meta

  private meta(key: string): string | null {
    const row = this.sql.exec<{ value: string }>('SELECT value FROM meta WHERE key = ?', key).toArray()[0];
    return row?.value ?? null;
  }

  private setMeta(key: string, value: string): void {
    this.sql.exec('INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)', key, value);
  }

  private accountContext() {
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

  private loadCursors(): Map<string, CursorState> {
    const rows = this.sql
      .exec<{ path: string; uidvalidity: number; last_uid: number; highest_modseq: string | null; resync: number }>(
        'SELECT * FROM folder_cursors',
      )
      .toArray();
    return new Map(rows.map((r) => [r.path, { ...r, resync: r.resync === 1 }]));
  }

  private saveCursors(cursors: Map<string, CursorState>): void {
    this.ctx.storage.transactionSync(() => {
      this.sql.exec('DELETE FROM folder_cursors');
      for (const c of cursors.values()) {
        this.sql.exec(
          'INSERT INTO folder_cursors (path, uidvalidity, last_uid, highest_modseq, resync) VALUES (?, ?, ?, ?, ?)',
          c.path,
          c.uidvalidity,
          c.last_uid,
          c.highest_modseq,
          c.resync ? 1 : 0,
        );
      }
    });
  }

  // ------------------------------------------------------------------ initial sync (worker/sync/initial-sync.ts)

  private loadInitialSync(): InitialSync | null {
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

  private saveInitialSync(sync: InitialSync): void {
    this.ctx.storage.transactionSync(() => {
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

  /** For the lease: what the initial sync still has to pull, or undefined. */
  initialSyncPlan() {
    return this.loadInitialSync()?.plan();
  }

  cursors(): FolderCursor[] {
    return [...this.loadCursors().values()].map(({ path, uidvalidity, last_uid, highest_modseq }) => ({
      path,
      uidvalidity,
      last_uid,
      highest_modseq,
    }));
  }

  // ------------------------------------------------------------------ lifecycle

  /**
   * Called once when the account is connected (after its D1 row exists): records who the account
   * is, creates its folders and sets every cursor at the folder's current UIDNEXT.
   */
  async initialize(init: AccountInit): Promise<void> {
    return this.serialize(async () => {
      this.sql.exec('DELETE FROM meta');
      this.sql.exec('DELETE FROM folder_cursors');
      this.sql.exec('DELETE FROM initial_sync_folders');
      this.sql.exec('DELETE FROM lease');
      this.setMeta('account_id', init.account_id);
      this.setMeta('email', init.email);
      this.setMeta('user_id', init.user_id);
      this.setMeta('connected_at_ms', String(init.connected_at_ms));
      const applier = new ChangeApplier(this.env, this.accountContext(), new Map());
      await applier.loadFolders();
      await this.commit(await applier.applyFolders(init.folders, { baseline: true }));
      this.saveCursors(applier.cursors);
      if (init.initial_sync_since_ms != null) {
        // What was in each folder at connect (below its UIDNEXT) is what the initial sync may pull.
        const folders = [...applier.cursors.values()]
          .filter((c) => c.last_uid > 0)
          .map((c) => [c.path, { uidvalidity: c.uidvalidity, below_uid: c.last_uid + 1 }] as const);
        this.saveInitialSync(new InitialSync(init.initial_sync_since_ms, 'pending', new Map(folders)));
      }
    });
  }

  /** New credentials were given: whoever holds the account must reconnect with them. */
  dropLease(): string | null {
    const holder = this.currentLease()?.gateway_id ?? null;
    this.sql.exec('DELETE FROM lease');
    return holder;
  }

  /**
   * The account is being removed: forget the sync state and purge its rows from D1 and its blobs
   * from R2. Returns the gateway that held it, to be told to stop.
   */
  async remove(): Promise<string | null> {
    return this.serialize(async () => {
      const accountId = this.meta('account_id');
      const holder = this.dropLease();
      this.setMeta('removed', '1');
      this.sql.exec('DELETE FROM folder_cursors');
      this.sql.exec('DELETE FROM initial_sync_folders');
      this.sql.exec('DELETE FROM orphans');
      await this.ctx.storage.deleteAlarm();
      if (accountId) await purgeAccountData(this.env, accountId);
      return holder;
    });
  }

  // ------------------------------------------------------------------ leases

  currentLease(): Lease | null {
    return (
      this.sql
        .exec<{ gateway_id: string; expires_at: number }>('SELECT gateway_id, expires_at FROM lease')
        .toArray()[0] ?? null
    );
  }

  /**
   * Grant the account to `gatewayId` if nobody holds it, the holder's lease lapsed, or the caller
   * already holds it (renewal).
   */
  acquireLease(gatewayId: string, ttlMs: number = LEASE_TTL_MS): { granted: boolean; lease: Lease | null } {
    if (!this.meta('account_id') || this.meta('removed') === '1') return { granted: false, lease: null };
    const now = Date.now();
    const current = this.currentLease();
    if (current && current.gateway_id !== gatewayId && current.expires_at > now)
      return { granted: false, lease: current };
    const lease = { gateway_id: gatewayId, expires_at: now + ttlMs };
    this.sql.exec(
      'INSERT OR REPLACE INTO lease (singleton, gateway_id, expires_at) VALUES (1, ?, ?)',
      lease.gateway_id,
      lease.expires_at,
    );
    return { granted: true, lease };
  }

  /** Renew only a lease the gateway still holds (a lapsed one nobody took counts as held). */
  renewLease(gatewayId: string, ttlMs: number = LEASE_TTL_MS): boolean {
    const current = this.currentLease();
    if (!current || current.gateway_id !== gatewayId) return false;
    return this.acquireLease(gatewayId, ttlMs).granted;
  }

  releaseLease(gatewayId: string): void {
    this.sql.exec('DELETE FROM lease WHERE gateway_id = ?', gatewayId);
  }

  /** Null when `gatewayId` holds the lease, else why not. */
  private leaseProblem(gatewayId: string): string | null {
    const current = this.currentLease();
    if (this.meta('removed') === '1') return 'the account was removed';
    if (!current || current.gateway_id !== gatewayId)
      return `the account is held by ${current?.gateway_id ?? 'nobody'}`;
    return null;
  }

  // ------------------------------------------------------------------ changes

  /** Apply a batch of changes from the gateway holding the lease, in order. Returns the cursors after it. */
  async applyChanges(gatewayId: string, changes: Change[]): Promise<HolderResult<FolderCursor[]>> {
    return this.serialize(async () => {
      const problem = this.leaseProblem(gatewayId);
      if (problem) return { ok: false, lease_lost: problem };
      const applier = new ChangeApplier(this.env, this.accountContext(), this.loadCursors(), this.loadInitialSync());
      await applier.loadFolders();
      for (const change of changes) {
        const result = await applier.apply(change);
        await this.commit(result);
        // Progress is recorded only after the change's rows are committed.
        this.saveCursors(applier.cursors);
        if (applier.initialSync) this.saveInitialSync(applier.initialSync);
      }
      return { ok: true, value: this.cursors() };
    });
  }

  /** R2 first, then one D1 batch, then orphan bookkeeping, then the events go to the queue. */
  private async commit(result: ChangeResult): Promise<void> {
    await Promise.all(
      result.blobs.map((b) => this.env.BLOBS.put(b.key, b.body, { httpMetadata: { contentType: b.contentType } })),
    );
    for (const batch of d1Batches(result)) await this.env.DB.batch(batch);
    for (const id of result.adopted) this.sql.exec('DELETE FROM orphans WHERE email_id = ?', id);
    if (result.orphans.length) {
      const due = Date.now() + ORPHAN_GRACE_MS;
      for (const id of result.orphans)
        this.sql.exec('INSERT OR REPLACE INTO orphans (email_id, due_at) VALUES (?, ?)', id, due);
      const alarm = await this.ctx.storage.getAlarm();
      if (alarm === null || alarm > due) await this.ctx.storage.setAlarm(due);
    }
    this.dispatch(result.events);
  }

  private dispatch(events: OutboxEvent[]): void {
    if (events.length)
      this.ctx.waitUntil(
        dispatchEvents(
          this.env,
          events.map((e) => e.id),
        ),
      );
  }

  /** Orphans whose grace ran out and that found no folder again are deleted: email.delete. */
  override async alarm(): Promise<void> {
    await this.serialize(async () => {
      const now = Date.now();
      const due = this.sql
        .exec<{ email_id: string }>('SELECT email_id FROM orphans WHERE due_at <= ?', now)
        .toArray()
        .map((r) => r.email_id);
      if (due.length) {
        const accountId = this.meta('account_id');
        if (accountId) await this.deleteOrphans(accountId, due);
        for (const id of due) this.sql.exec('DELETE FROM orphans WHERE email_id = ?', id);
      }
      const next = this.sql.exec<{ due: number | null }>('SELECT MIN(due_at) AS due FROM orphans').toArray()[0]?.due;
      if (next) await this.ctx.storage.setAlarm(next);
    });
  }

  private async deleteOrphans(accountId: string, emailIds: string[]): Promise<void> {
    const db = this.env.DB;
    const rows: EmailRow[] = [];
    for (const id of emailIds) {
      const row = await db
        .prepare(
          'SELECT * FROM emails WHERE id = ? AND account_id = ? AND NOT EXISTS (SELECT 1 FROM email_folders WHERE email_id = emails.id)',
        )
        .bind(id, accountId)
        .first<EmailRow>();
      if (row) rows.push(row);
    }
    const records = await loadEmailRecords(this.env, rows);
    const events: OutboxEvent[] = [];
    for (const record of records) {
      const { row } = record;
      const event = newEvent(row.is_draft ? 'email.draft.delete' : 'email.delete', accountId, emailEventData(record));
      events.push(event);
      await db.batch([
        // Contacts lose this email: count down, take the latest date from what remains, drop the ones left at zero.
        db
          .prepare(
            `UPDATE contacts SET emails_count = emails_count - 1,
               last_email_ms = COALESCE((${latestOtherEmail('e.date_ms')}), last_email_ms),
               last_email_at = COALESCE((${latestOtherEmail('e.date')}), last_email_at)
             WHERE account_id = ? AND identifier IN (SELECT address FROM email_participants WHERE email_id = ?)`,
          )
          .bind(row.id, row.id, accountId, row.id),
        db
          .prepare(
            'DELETE FROM contacts WHERE account_id = ? AND emails_count <= 0 AND identifier IN (SELECT address FROM email_participants WHERE email_id = ?)',
          )
          .bind(accountId, row.id),
        // Its search index row goes with its email_search row (trigger).
        db.prepare('DELETE FROM email_search WHERE email_id = ?').bind(row.id),
        db.prepare('DELETE FROM thread_keys WHERE email_id = ?').bind(row.id),
        db.prepare('DELETE FROM email_participants WHERE email_id = ?').bind(row.id),
        db.prepare('DELETE FROM attachments WHERE email_id = ?').bind(row.id),
        db.prepare('DELETE FROM emails WHERE id = ?').bind(row.id),
        eventStatement(db, event),
      ]);
      const keys = [row.raw_key, row.body_key, ...record.attachments.map((a) => a.blob_key)].filter(
        (k): k is string => !!k,
      );
      if (keys.length) await this.env.BLOBS.delete(keys);
    }
    this.dispatch(events);
  }

  // ------------------------------------------------------------------ commands

  private command<T>(work: () => Promise<T>): Promise<CommandAnswer<T>> {
    const run = this.commandTail.then(() => answerOf(work));
    this.commandTail = run;
    return run;
  }

  /** Send a message or save a draft through the gateway holding the account (common/relay.ts `send`). */
  async sendOutgoing(request: Extract<GatewayRequest, { op: 'send' }>): Promise<CommandAnswer<OutgoingResult>> {
    return this.command(async () =>
      OutgoingResult.parse(await callHolder(this.env, () => this.currentLease(), request, COMMAND_BUDGET.send)),
    );
  }

  /**
   * A mailbox action on one email: carried out by the gateway, then written to D1 with its
   * email.update on the change chain (so it cannot interleave with a sync batch). Returns the email.
   */
  async modifyEmail(emailId: string, wanted: ModifyWanted) {
    return this.command(async () => {
      const accountId = this.meta('account_id');
      if (!accountId || this.meta('removed') === '1') throw notFound('Account');
      const plan = await planModify(this.env, accountId, emailId, wanted);
      const result = plan.steps.length
        ? ModifyResult.parse(
            await callHolder(
              this.env,
              () => this.currentLease(),
              { op: 'modify', account_id: accountId, steps: plan.steps },
              COMMAND_BUDGET.action,
            ),
          )
        : { uids: [] };
      const { email, events } = await this.serialize(() => applyModify(this.env, accountId, plan, result));
      this.dispatch(events);
      return email;
    });
  }

  // ------------------------------------------------------------------ status

  /** The gateway's view of the connection; a change of status is written with its event. */
  async reportStatus(gatewayId: string, status: AccountStatus, error: string | null): Promise<HolderResult<null>> {
    return this.serialize(async () => {
      const problem = this.leaseProblem(gatewayId);
      if (problem) return { ok: false, lease_lost: problem };
      const accountId = this.accountContext().accountId;
      const db = this.env.DB;
      const row = await db
        .prepare(`SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE id = ?`)
        .bind(accountId)
        .first<AccountRow>();
      const lastError = status === 'running' ? null : error;
      if (!row || (row.status === status && row.last_error === lastError)) return { ok: true, value: null };
      const now = isoNow();
      const updated: AccountRow = { ...row, status, last_error: lastError };
      const event = newEvent(`account.status.${status}`, accountId, presentAccount(updated));
      await db.batch([
        db
          .prepare('UPDATE accounts SET status = ?, last_error = ?, updated_at = ? WHERE id = ?')
          .bind(status, lastError, now, accountId),
        eventStatement(db, event),
      ]);
      this.dispatch([event]);
      return { ok: true, value: null };
    });
  }
}

/** A column of the contact's latest email other than the one bound, inside an UPDATE of `contacts`. */
const latestOtherEmail = (column: 'e.date_ms' | 'e.date') =>
  `SELECT ${column} FROM email_participants p JOIN emails e ON e.id = p.email_id
   WHERE p.account_id = contacts.account_id AND p.address = contacts.identifier AND e.id != ? ORDER BY e.date_ms DESC LIMIT 1`;

/** Statements per D1 batch (one transaction) before a change is split, at unit ends only. */
const MAX_BATCH_STATEMENTS = 400;

/** The statements of a change as D1 batches: whole when small, else cut only where a unit ends. */
export function d1Batches(result: Pick<ChangeResult, 'statements' | 'unitEnds'>): D1PreparedStatement[][] {
  const { statements, unitEnds } = result;
  const out: D1PreparedStatement[][] = [];
  let start = 0;
  while (start < statements.length) {
    let end = statements.length;
    if (end - start > MAX_BATCH_STATEMENTS) {
      const fits = unitEnds.filter((e) => e > start && e <= start + MAX_BATCH_STATEMENTS);
      // The last unit end that fits; a single unit bigger than the limit still goes whole.
      end = fits.length ? fits[fits.length - 1]! : (unitEnds.find((e) => e > start) ?? statements.length);
    }
    out.push(statements.slice(start, end));
    start = end;
  }
  return out;
}

/** Delete an account's rows (in chunks, so no single statement grows with the mailbox) and its blobs. */
export async function purgeAccountData(env: Env, accountId: string): Promise<void> {
  const db = env.DB;
  const CHUNK = 500;
  for (const table of ['email_participants', 'attachments', 'email_folders', 'email_search', 'thread_keys']) {
    for (;;) {
      const { meta } = await db
        .prepare(`DELETE FROM ${table} WHERE rowid IN (SELECT rowid FROM ${table} WHERE account_id = ? LIMIT ${CHUNK})`)
        .bind(accountId)
        .run();
      if (meta.changes < CHUNK) break;
    }
  }
  for (;;) {
    const { meta } = await db
      .prepare(`DELETE FROM emails WHERE id IN (SELECT id FROM emails WHERE account_id = ? LIMIT ${CHUNK})`)
      .bind(accountId)
      .run();
    if (meta.changes < CHUNK) break;
  }
  await db.batch([
    db.prepare('DELETE FROM contacts WHERE account_id = ?').bind(accountId),
    db.prepare('DELETE FROM folders WHERE account_id = ?').bind(accountId),
  ]);
  let cursor: string | undefined;
  do {
    const listing = await env.BLOBS.list({ prefix: blobKeys.accountPrefix(accountId), cursor, limit: 1000 });
    if (listing.objects.length) await env.BLOBS.delete(listing.objects.map((o) => o.key));
    cursor = listing.truncated ? listing.cursor : undefined;
  } while (cursor);
}
