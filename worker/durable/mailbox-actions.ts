/**
 * The account's commands: sends (durable/send-queue.ts) and mailbox actions run one after another on a chain of their own
 * (a slow send never holds up sync). A mailbox action is carried out by the gateway holding the
 * account, then recorded in D1 with its event on the account's change chain, so it cannot
 * interleave with a sync batch.
 */
import { type Change, FolderActionResult, ModifyResult, type OutgoingResult } from '../../common/relay.ts';
import { answerOf, callHolder, COMMAND_BUDGET, type CommandAnswer } from '../commands/holder.ts';
import {
  DepartedPaths,
  pathsLeaving,
  planFolderAction,
  recordFolderAction,
  type FolderRequest,
} from '../commands/folders.ts';
import { applyModify, planModify, type ModifyWanted } from '../commands/modify.ts';
import { presentEmailSingle } from '../emails/present.ts';
import { readSourceHeaders } from '../emails/source-headers.ts';
import type { Env } from '../env.ts';
import type { OutboxEvent } from '../events/outbox.ts';
import { notFound } from '../lib/errors.ts';
import { ChangeApplier } from '../sync/apply.ts';
import type { AccountContext, ChangeResult } from '../sync/state.ts';
import type { AccountStore } from './account-store.ts';
import type { Lease } from './lease.ts';
import type { SendPath } from './schedules.ts';
import type { SendQueue, SendRequest } from './send-queue.ts';

/** What the account's object lends its commands. */
export interface ActionHost {
  env: Env;
  store: AccountStore;
  lease(): Lease | null;
  /** Who the account is; throws when it is not connected (removed). */
  context(): AccountContext;
  /** Runs `work` on the account's change chain. */
  onChangeChain<T>(work: () => Promise<T>): Promise<T>;
  commit(result: ChangeResult): Promise<void>;
  /** Emails are about to be marked with `mark`: they wait for evidence. */
  orphaned(mark: number): void;
  dispatch(events: OutboxEvent[]): void;
  /** Keeps the object alive until `work` ends (a send outlives its caller). */
  keepAlive(work: Promise<unknown>): void;
  /** Whether the lease holder reported the account running since its lease was granted (it can send). */
  ready(): boolean;
  /** Have the object's alarm run by `due`. */
  rearm(due: number): void;
}

export class MailboxActions {
  private tail: Promise<unknown> = Promise.resolve();
  /** Paths the API's folder renames and deletions took away (left out of listings taken before). */
  private readonly departed = new DepartedPaths();

  private readonly host: ActionHost;
  private readonly sends: SendQueue;

  constructor(sends: SendQueue, host: ActionHost) {
    this.sends = sends;
    this.host = host;
  }

  /** Runs `work` after the commands before it; its outcome is an answer, never a rejection. */
  run<T>(work: () => Promise<T>): Promise<CommandAnswer<T>> {
    const run = this.tail.then(() => answerOf(work));
    this.tail = run;
    return run;
  }

  /**
   * Send a message or save a draft through the gateway holding the account (common/relay.ts `send`),
   * carried to its end and its outcome recorded whether or not the caller still waits.
   */
  send(
    ticket: string,
    request: SendRequest,
    messageId: string,
    scheduled = false,
  ): Promise<CommandAnswer<OutgoingResult>> {
    const run = this.sends.run(
      ticket,
      request,
      messageId,
      (work) => this.run(work),
      () => this.host.lease(),
      scheduled,
    );
    this.host.keepAlive(run);
    return run;
  }

  /** How a scheduled send goes out (durable/schedules.ts). */
  sendPath(): SendPath {
    return {
      admit: () => this.sends.admit(),
      release: (ticket) => this.sends.release(ticket),
      send: (ticket, request, messageId) => this.send(ticket, request, messageId, true),
      lease: () => this.host.lease(),
      ready: () => this.host.ready(),
      keepAlive: (work) => this.host.keepAlive(work),
      rearm: (due) => this.host.rearm(due),
      takeBackUnhanded: (name) => this.sends.takeBackUnhanded(name),
    };
  }

  /** A sync batch without the folders an API action took away since its listing was taken. */
  withoutDeparted(changes: Change[]): Change[] {
    return this.departed.filter(changes);
  }

  /** A mailbox action on one email (flags, move, trash); returns the email as it now is. */
  modifyEmail(emailId: string, wanted: ModifyWanted) {
    const { host } = this;
    return this.run(async () => {
      const accountId = host.store.meta('account_id');
      if (!accountId || host.store.meta('removed') === '1') throw notFound('Account');
      const plan = await planModify(host.env, accountId, emailId, wanted, host.store.loadCursors());
      const result = plan.steps.length
        ? ModifyResult.parse(
            await callHolder(
              host.env,
              () => host.lease(),
              { op: 'modify', account_id: accountId, steps: plan.steps },
              COMMAND_BUDGET.action,
            ),
          )
        : { uids: [] };
      const { record, events } = await host.onChangeChain(() => {
        // Removed while the gateway carried it out: nothing more is written for the account.
        if (host.store.meta('removed') === '1') throw notFound('Account');
        const mark = host.store.nextOrphanMark();
        // Marked before the rows are written; cleared by the next alarm if nothing was left.
        return applyModify(host.env, accountId, plan, result, mark, () => host.orphaned(mark));
      });
      host.dispatch(events);
      // The answer's headers are read after the change is written: a failed read cannot undo it.
      await readSourceHeaders(host.env, [record]);
      return presentEmailSingle(record);
    });
  }

  /**
   * Create, rename or delete a folder (commands/folders.ts): checked, carried out by the gateway,
   * then recorded with its event before the sync's next listing is applied.
   */
  manageFolder(request: FolderRequest) {
    const { host } = this;
    return this.run(async () => {
      const context = host.context();
      const plan = await planFolderAction(host.env, context.accountId, request);
      const answer = plan.action
        ? FolderActionResult.parse(
            await callHolder(
              host.env,
              () => host.lease(),
              { op: 'folder', account_id: context.accountId, action: plan.action },
              COMMAND_BUDGET.action,
            ),
          )
        : { path: null, status: null };
      return host.onChangeChain(async () => {
        const { store } = host;
        if (store.meta('removed') === '1') throw notFound('Account');
        const applier = new ChangeApplier(host.env, context, store.loadCursors(), store.loadInitialSync());
        await applier.loadFolders();
        this.departed.add(pathsLeaving(plan, applier.state.folders.keys()), answer.listed_after);
        const { folder, result } = await recordFolderAction(applier.state, plan, answer);
        await host.commit(result);
        store.saveCursors(applier.cursors);
        if (applier.initialSync) store.saveInitialSync(applier.initialSync);
        return folder;
      });
    });
  }
}
