/**
 * The account object's alarm: a bounded step per run of a removed account's purge, else of its
 * folders' departures (sync/departures.ts), of the orphans the evidence covers (sync/orphans.ts,
 * deleted with email.delete) and of the staged sources whose grace ran out; then the scheduled sends
 * whose time came. The one alarm is set at the earliest of all of them.
 */
import { deleteAccountRow, purgeStep } from '../accounts/purge.ts';
import { releaseStaged } from '../emails/blobs.ts';
import type { Env } from '../env.ts';
import type { OutboxEvent } from '../events/outbox.ts';
import { directoryEnv } from '../shards/registry.ts';
import { departuresStep } from '../sync/departures.ts';
import { deleteOrphansUpTo, evidenceReach, hasOrphans, ORPHAN_STEP } from '../sync/orphans.ts';
import type { ChangeResult } from '../sync/state.ts';
import type { AccountStore } from './account-store.ts';
import type { Schedules, SendPath } from './schedules.ts';
import type { StagedReleases } from './staged-releases.ts';

/** A part of the alarm that failed is tried again this much later. */
const ALARM_RETRY_MS = 30_000;

/** What the alarm works with: the object's parts, and its change chain, commit and dispatch. */
export interface HousekeepingDeps {
  env: Env;
  store: AccountStore;
  staged: StagedReleases;
  schedules: Schedules;
  sendPath: () => SendPath;
  onChangeChain: <T>(work: () => Promise<T>) => Promise<T>;
  commit: (result: ChangeResult) => Promise<void>;
  /** Hands committed events to the queue; `env`'s DB is where they were written. */
  dispatch: (events: OutboxEvent[], env?: Env) => void;
  setAlarm: (at: number) => Promise<void>;
}

export async function runAlarm(deps: HousekeepingDeps): Promise<void> {
  // Each part fails on its own: a failing one is tried again soon, and the others (the scheduled
  // sends above all) still run; the next alarm is always set (a thrown alarm is retried a few
  // times, then dropped).
  let retry: number | null = null;
  const step = await deps
    .onChangeChain(() => housekeepingStep(deps))
    .catch((err: unknown) => {
      console.error('account alarm: housekeeping failed:', err instanceof Error ? err.message : err);
      retry = Date.now() + ALARM_RETRY_MS;
      return { removed: false, more: false };
    });
  if (step === null || step.removed) return;
  // Scheduled sends start outside the change chain: their sends run on the command chain.
  await deps.schedules.runDue(deps.sendPath()).catch((err: unknown) => {
    console.error('account alarm: scheduled sends failed:', err instanceof Error ? err.message : err);
    retry = Date.now() + ALARM_RETRY_MS;
  });
  const next = [step.more ? Date.now() : null, retry, deps.staged.next(), deps.schedules.next()].filter(
    (t) => t !== null,
  );
  if (next.length) await deps.setAlarm(Math.max(Math.min(...next), Date.now()));
}

/**
 * The alarm's bounded step on the change chain: the purge of a removed account, else departures,
 * orphans and staged sources. Null when the object holds no account.
 */
async function housekeepingStep(deps: HousekeepingDeps): Promise<{ removed: boolean; more: boolean } | null> {
  const { env, store, staged } = deps;
  const accountId = store.meta('account_id');
  if (!accountId) return null;
  if (store.meta('removed') === '1') {
    await purge(deps, accountId);
    return { removed: true, more: false };
  }
  const now = Date.now();
  const departures = await departuresStep(env, store.accountContext(), store.loadCursors());
  await deps.commit(departures.result);
  let more = departures.more;
  if (store.orphansWaiting()) {
    const reach = evidenceReach(store.loadCursors().values(), store.listedMark());
    const deleted = await deleteOrphansUpTo(env, accountId, reach, (keys) => staged.defer(keys, now));
    deps.dispatch(deleted);
    const moreOrphans = deleted.length >= ORPHAN_STEP;
    more ||= moreOrphans;
    if (!moreOrphans) store.setOrphansWaiting(await hasOrphans(env, accountId));
  }
  const releases = staged.due(now);
  if (releases.length) {
    await releaseStaged(env, releases);
    staged.done(releases.map((r) => r.key));
  }
  return { removed: false, more };
}

/** One step of a removed account's purge; the next follows at once, until the row goes with account.remove. */
async function purge(deps: HousekeepingDeps, accountId: string): Promise<void> {
  if (!(await purgeStep(deps.env, accountId))) {
    await deps.setAlarm(Date.now());
    return;
  }
  const event = await deleteAccountRow(deps.env, accountId);
  if (event) deps.dispatch([event], directoryEnv(deps.env));
}
