/**
 * One Durable Object per account (named by the account id): the owner of that account's sync
 * state (per folder UIDVALIDITY, last UID, HIGHESTMODSEQ), of the lease that says which gateway
 * holds the account, and of the order in which the account's changes are applied. Native RPC;
 * state in the object's SQLite storage.
 */
import { DurableObject } from 'cloudflare:workers';
import type {
  OutgoingResult,
  AccountStatus,
  Change,
  ChangesSequence,
  FolderCursor,
  FolderInfo,
  OrphanState,
} from '../../common/relay.ts';
import { recordSkippedMessage, writeAccountStatus } from '../accounts/status.ts';
import type { Env } from '../env.ts';
import { meterCall, meteredEnv } from '../lib/d1-meter.ts';
import { dispatchEvents, type OutboxEvent } from '../events/outbox.ts';
import { ChangeApplier } from '../sync/apply.ts';
import { writeResult } from '../sync/commit.ts';
import { InitialSync } from '../sync/initial-sync.ts';
import { hasDepartures } from '../sync/departures.ts';
import { hasOrphans } from '../sync/orphans.ts';
import { preparedByMessage, type Prepared } from '../sync/prepare.ts';
import { runChanges } from '../sync/run-changes.ts';
import type { ChangeResult } from '../sync/state.ts';
import { countingEnv, logStats, newStats, type SyncStats } from '../sync/stats.ts';
import { ChangeOrder } from '../sync/order.ts';
import type { CommandAnswer } from '../commands/holder.ts';
import type { ModifyWanted } from '../commands/modify.ts';
import type { FolderRequest } from '../commands/folders.ts';
import { notFound } from '../lib/errors.ts';
import { AccountStore } from './account-store.ts';
import { accountShard, bindAccountShard, directoryEnv } from '../shards/registry.ts';
import { runAlarm } from './housekeeping.ts';
import { MailboxActions } from './mailbox-actions.ts';
import { type Admission, SendQueue, type SendRequest } from './send-queue.ts';
import { type CancelResult, type Schedule, Schedules } from './schedules.ts';
import type { ScheduledRow } from '../send/scheduled.ts';
import { STAGED_GRACE_MS, StagedReleases } from './staged-releases.ts';
import { claimLease, type HolderResult, type Lease } from './lease.ts';

/** What a batch of changes leaves: the cursors, and the state of emails in no folder. */
export interface AppliedChanges {
  cursors: FolderCursor[];
  orphans: OrphanState;
}
/** Meta key: the lease holder that reported the account running since its lease was granted (it can send). */
const READY_HOLDER = 'ready_holder';

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
  private readonly store: AccountStore;
  private readonly staged: StagedReleases;
  private readonly sends: SendQueue;
  private readonly schedules: Schedules;
  private readonly order: ChangeOrder;
  /** Changes of one account are applied strictly one after another. */
  private tail: Promise<unknown> = Promise.resolve();
  /** Sends and mailbox actions, on a chain of their own: a slow send never holds up sync. */
  private readonly actions: MailboxActions;
  /** Whether this instance has looked for orphans and staged releases a crash may have left unrecorded. */
  private orphansChecked = false;

  constructor(ctx: DurableObjectState, rawEnv: Env) {
    // The account's view of env: its DB becomes the account's shard once the account is known.
    const env: Env = { ...meteredEnv(rawEnv) };
    super(ctx, env);
    this.store = new AccountStore(ctx.storage);
    this.staged = new StagedReleases(ctx.storage.sql);
    this.sends = new SendQueue(ctx.storage.sql, env);
    this.schedules = new Schedules(ctx.storage.sql, env);
    this.order = new ChangeOrder(this.store);
    this.actions = new MailboxActions(this.sends, {
      env,
      store: this.store,
      lease: () => this.currentLease(),
      context: () => this.store.accountContext(),
      onChangeChain: (work) => this.serialize(work),
      commit: (result) => this.commit(result),
      orphaned: (mark) => this.orphaned(mark),
      dispatch: (events) => this.dispatch(events),
      keepAlive: (work) => this.ctx.waitUntil(work),
      rearm: (due) => this.ctx.waitUntil(this.alarmAt(due)),
      ready: () => {
        const holder = this.currentLease()?.gateway_id;
        return !!holder && this.store.meta(READY_HOLDER) === holder;
      },
    });
    ctx.blockConcurrencyWhile(async () => {
      this.store.migrate();
      this.staged.migrate();
      this.sends.migrate();
      this.schedules.migrate();
      const accountId = this.store.meta('account_id');
      if (accountId) await this.bindShard(accountId);
    });
  }

  /** Points this object's env at the shard holding the account's mail (shards/registry.ts). */
  private async bindShard(accountId: string): Promise<void> {
    bindAccountShard(this.env, await accountShard(this.env, accountId));
  }

  private serialize<T>(work: () => Promise<T>): Promise<T> {
    const run = this.tail.then(work, work);
    this.tail = run.catch(() => undefined);
    return run;
  }

  /** For the lease: what the initial sync still has to pull, or undefined. */
  initialSyncPlan() {
    return this.store.loadInitialSync()?.plan();
  }

  /** What a granted lease tells the gateway besides its mailbox's settings: one call to this object. */
  leaseState() {
    return { cursors: this.cursors(), initial_sync: this.initialSyncPlan(), orphans: this.orphanState() };
  }

  /** What the gateway is told of emails in no folder (common/relay.ts `OrphanState`). */
  orphanState(): OrphanState {
    return { mark: this.store.orphanMark(), waiting: this.store.orphansWaiting() ?? false };
  }

  cursors(): FolderCursor[] {
    return this.store.folderCursors();
  }

  // ------------------------------------------------------------------ lifecycle

  /**
   * Called once when the account is connected (after its D1 row exists): records who the account
   * is, creates its folders and sets every cursor at the folder's current UIDNEXT.
   */
  async initialize(init: AccountInit): Promise<void> {
    return this.serialize(async () => {
      const { store } = this;
      await this.bindShard(init.account_id);
      store.reset();
      store.setMeta('account_id', init.account_id);
      store.setMeta('email', init.email);
      store.setMeta('user_id', init.user_id);
      store.setMeta('connected_at_ms', String(init.connected_at_ms));
      const applier = new ChangeApplier(this.env, this.store.accountContext(), new Map());
      await applier.loadFolders();
      await this.commit(await applier.applyFolders(init.folders, { baseline: true }));
      store.saveCursors(applier.cursors);
      if (init.initial_sync_since_ms != null) {
        // What was in each folder at connect (below its UIDNEXT) is what the initial sync may pull.
        const folders = [...applier.cursors.values()]
          .filter((c) => c.last_uid > 0)
          .map((c) => [c.path, { uidvalidity: c.uidvalidity, below_uid: c.last_uid + 1 }] as const);
        store.saveInitialSync(new InitialSync(init.initial_sync_since_ms, 'pending', new Map(folders)));
      }
    });
  }

  /** New credentials were given: whoever holds the account must reconnect with them. */
  dropLease(): string | null {
    const holder = this.currentLease()?.gateway_id ?? null;
    this.store.dropLease();
    return holder;
  }

  /**
   * The account is being removed (its row is already hidden from the API): forget the sync state
   * and start the purge, one bounded step per alarm; the last step deletes the row with its
   * account.remove event. Returns the gateway that held it, to be told to stop. Repeatable.
   */
  async remove(): Promise<string | null> {
    return this.serialize(async () => {
      const holder = this.dropLease();
      this.store.setMeta('removed', '1');
      this.store.forgetSync();
      this.staged.clear(); // the purge deletes the account's whole prefix
      await this.schedules.cancelAll('The account was removed before its send time; nothing was sent.');
      await this.ctx.storage.setAlarm(Date.now());
      return holder;
    });
  }

  // ------------------------------------------------------------------ leases

  currentLease(): Lease | null {
    return this.store.lease();
  }

  /**
   * Grant the account to `gatewayId` if nobody holds it, the holder's heartbeat ran out, or the caller
   * already holds it (a restart or new settings); the compare-and-set is D1's (lease.ts `claimLease`).
   * Waits for changes being applied, so the cursors the new holder is given include them. With
   * `instance`, only while that process owns the gateway id.
   */
  async acquireLease(gatewayId: string, instance?: string): Promise<{ granted: boolean; lease: Lease | null }> {
    return this.serialize(async () => {
      const accountId = this.store.meta('account_id');
      if (!accountId || this.store.meta('removed') === '1') return { granted: false, lease: null };
      const claim = await claimLease(this.env, accountId, gatewayId, instance);
      if (!claim.granted) {
        const holder = claim.holder ?? this.currentLease()?.gateway_id;
        return { granted: false, lease: holder ? { gateway_id: holder } : null };
      }
      const lease = { gateway_id: gatewayId };
      this.store.setLease(lease);
      this.store.setMeta(READY_HOLDER, ''); // until it reports the account running (reportStatus)
      return { granted: true, lease };
    });
  }

  /** Null when `gatewayId` holds the lease, else why not. */
  private leaseProblem(gatewayId: string): string | null {
    const current = this.currentLease();
    if (this.store.meta('removed') === '1') return 'the account was removed';
    if (!current || current.gateway_id !== gatewayId)
      return `the account is held by ${current?.gateway_id ?? 'nobody'}`;
    return null;
  }

  // ------------------------------------------------------------------ changes

  /**
   * Apply a batch of changes from the gateway holding the lease, in order (`sequence`: its place
   * among the gateway's batches on their way, sync/order.ts; `prepared`: its sources already
   * parsed, sync/prepare.ts). Returns the cursors after it.
   */
  async applyChanges(
    gatewayId: string,
    changes: Change[],
    sequence?: ChangesSequence,
    prepared?: Prepared,
  ): Promise<HolderResult<AppliedChanges> | { ok: false; out_of_order: string }> {
    return meterCall(this.env, 'object applyChanges', async () => {
      if (sequence) await this.order.waitForTurn(sequence, gatewayId);
      return this.serialize(async () => {
        const problem = this.leaseProblem(gatewayId);
        if (problem) return { ok: false, lease_lost: problem };
        const turn = sequence ? this.order.turn(sequence, gatewayId) : 'apply';
        if (turn === 'applied') return { ok: true, value: this.applied() };
        if (turn === 'refused') return { ok: false, out_of_order: `batch ${sequence!.n} came out of order` };
        const context = this.store.accountContext();
        if (!this.orphansChecked) {
          this.orphansChecked = true;
          this.store.setOrphansWaiting(await hasOrphans(this.env, context.accountId));
          if (await hasDepartures(this.env, context.accountId)) await this.alarmAt(Date.now());
          const due = this.staged.next();
          if (due !== null) await this.alarmAt(due);
        }
        const stats = newStats();
        const env = countingEnv(this.env, stats);
        const applier = new ChangeApplier(env, context, this.store.loadCursors(), this.store.loadInitialSync(), stats);
        applier.state.prepared = preparedByMessage(changes, prepared);
        applier.state.orphanMark = this.store.nextOrphanMark();
        applier.state.listedMark = this.store.listedMark();
        const start = performance.now();
        await applier.loadFolders();
        await runChanges(
          {
            applier,
            store: this.store,
            commit: (result) => this.commit(result, env, stats, applier.state.orphanMark),
            skipped: (where, reason) => recordSkippedMessage(this.env, context.accountId, where, reason),
          },
          this.actions.withoutDeparted(changes),
        );
        if (sequence) this.order.applied(sequence, gatewayId);
        this.store.setListedMark(applier.state.listedMark);
        // New evidence: the orphans it covers are deleted in the alarm (an invocation of its own).
        if (this.store.orphansWaiting() && changes.some((c) => c.type === 'passed')) await this.alarmAt(Date.now());
        stats.applyMs = performance.now() - start;
        if (stats.messages) logStats(stats);
        return { ok: true, value: this.applied() };
      });
    });
  }

  private applied(): AppliedChanges {
    return { cursors: this.cursors(), orphans: this.orphanState() };
  }

  /**
   * Staged sources the change did not use are recorded first (deleted later: another change may
   * name them), then R2 and D1 (sync/commit.ts), the orphan alarm, and the events go to the queue.
   */
  private async commit(result: ChangeResult, env: Env = this.env, stats?: SyncStats, orphanMark = 0): Promise<void> {
    if (result.unusedStaged.length) await this.deferStaged(result.unusedStaged);
    // Recorded before the rows: the gateway must never be told a mark below one an email carries.
    if (result.orphaned) this.orphaned(orphanMark);
    await writeResult(env, result, stats);
    if (result.departed) await this.alarmAt(Date.now());
    this.dispatch(result.events);
  }

  /** Emails were (or are about to be) marked with `mark`: they wait for evidence. */
  private orphaned(mark: number): void {
    this.store.setOrphanMark(mark);
    this.store.setOrphansWaiting(true);
  }

  private async deferStaged(keys: string[]): Promise<void> {
    const now = Date.now();
    this.staged.defer(keys, now);
    await this.alarmAt(now + STAGED_GRACE_MS);
  }

  private async alarmAt(due: number): Promise<void> {
    const alarm = await this.ctx.storage.getAlarm();
    if (alarm === null || alarm > due) await this.ctx.storage.setAlarm(due);
  }

  /** Hands committed events to the queue; `env`'s DB is where they were written (the shard, or the directory). */
  private dispatch(events: OutboxEvent[], env: Env = this.env): void {
    if (events.length)
      this.ctx.waitUntil(
        dispatchEvents(
          env,
          events.map((e) => e.id),
        ),
      );
  }

  /** One bounded step of the account's housekeeping, then its due scheduled sends (durable/housekeeping.ts). */
  override async alarm(): Promise<void> {
    await runAlarm({
      env: this.env,
      store: this.store,
      staged: this.staged,
      schedules: this.schedules,
      sendPath: () => this.actions.sendPath(),
      onChangeChain: (work) => this.serialize(work),
      commit: (result) => this.commit(result),
      dispatch: (events, env) => this.dispatch(events, env),
      setAlarm: (at) => this.ctx.storage.setAlarm(at),
    });
  }

  // ------------------------------------------------------------------ commands

  /** A place in the account's bounded queue of sends (durable/send-queue.ts), or how long to wait for one. */
  admitSend(): Promise<Admission> {
    return this.sends.admit();
  }

  releaseSend(ticket: string): void {
    this.sends.release(ticket);
  }

  /** Whether this object took a handed-on send, else fences it off (durable/send-queue.ts `fence`). */
  fenceSend(messageId: string, handedAtMs: number): 'taken' | 'fenced' {
    return this.sends.fence(messageId, handedAtMs);
  }

  /**
   * Send a message or save a draft through the gateway holding the account (common/relay.ts `send`).
   * The object carries it to its end and records the outcome, whether or not the caller still waits.
   */
  sendOutgoing(ticket: string, request: SendRequest, messageId: string): Promise<CommandAnswer<OutgoingResult>> {
    return this.actions.send(ticket, request, messageId);
  }

  /** A send to go at `send_at_ms` (durable/schedules.ts); the alarm is moved to it if it is the earliest. */
  async schedule(s: Schedule, listed: ScheduledRow): Promise<void> {
    if (this.store.meta('removed') === '1') throw notFound('Account');
    await this.schedules.add(s, listed);
    await this.alarmAt(s.send_at_ms);
  }

  /** Cancels a schedule still waiting; the decision is made here, against the send time. */
  cancelSchedule(id: string): Promise<CancelResult> {
    return this.schedules.cancel(id);
  }

  /** A mailbox action on one email (durable/mailbox-actions.ts); returns the email. */
  modifyEmail(emailId: string, wanted: ModifyWanted) {
    return this.actions.modifyEmail(emailId, wanted);
  }

  /** Create, rename or delete a folder (durable/mailbox-actions.ts). */
  manageFolder(request: FolderRequest) {
    return this.actions.manageFolder(request);
  }

  // ------------------------------------------------------------------ status

  /** The gateway's view of the connection; a change of status is written with its event. */
  async reportStatus(gatewayId: string, status: AccountStatus, error: string | null): Promise<HolderResult<null>> {
    return this.serialize(async () => {
      const problem = this.leaseProblem(gatewayId);
      if (problem) return { ok: false, lease_lost: problem };
      const accountId = this.store.accountContext().accountId;
      this.store.setMeta(READY_HOLDER, status === 'running' ? gatewayId : '');
      if (status === 'running') {
        // Scheduled sends that came due while no gateway could send them go now.
        const due = this.schedules.wakeDue(Date.now());
        if (due !== null) await this.alarmAt(due);
      }
      const event = await writeAccountStatus(this.env, accountId, status, error);
      if (event) this.dispatch([event], directoryEnv(this.env));
      return { ok: true, value: null };
    });
  }
}
