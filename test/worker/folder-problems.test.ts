// A folder that cannot make progress is visible in the account's last_error, and the rest goes on.
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import type { Change } from '../../common/relay.ts';
import type { AccountStore } from '../../worker/durable/account-store.ts';
import type { ChangeApplier } from '../../worker/sync/apply.ts';
import { writeResult } from '../../worker/sync/commit.ts';
import { runChanges } from '../../worker/sync/run-changes.ts';
import { emptyResult, type ChangeResult } from '../../worker/sync/state.ts';
import { api } from './helpers.ts';
import { leased } from './sync-helpers.ts';

const lastError = async (id: string) => (await api('GET', `/accounts/${id}`)).body.last_error as string | null;

describe('a folder that cannot make progress', () => {
  it('names a folder the server refuses in last_error, and clears it once the folder is read again', async () => {
    const { id, stub, gateway } = await leased();
    await stub.applyChanges(gateway, [
      { type: 'folder_problem', path: 'Projects', problem: 'the server refuses to open it: NO [NOPERM]' },
    ]);
    expect(await lastError(id)).toBe('folder Projects: the server refuses to open it: NO [NOPERM]');
    // Another folder readable again does not clear what this one says.
    await stub.applyChanges(gateway, [{ type: 'folder_problem', path: 'INBOX', problem: null }]);
    expect(await lastError(id)).toContain('folder Projects:');
    await stub.applyChanges(gateway, [{ type: 'folder_problem', path: 'Projects', problem: null }]);
    expect(await lastError(id)).toBeNull();
  });

  it('passes over a piece of flags that keeps failing, says so, and applies the changes after it', async () => {
    const { id } = await leased();
    const applied: string[] = [];
    const failures = new Map<string, number>();
    const store = {
      recordFailure: (path: string, uidvalidity: number, uid: number, reason: string) => {
        const key = `${path}:${uidvalidity}:${uid}`;
        failures.set(key, (failures.get(key) ?? 0) + 1);
        return { attempts: failures.get(key)!, first_failed_at: Date.now() - 60_000, reason };
      },
      clearFailure: (path: string, uidvalidity: number, uid: number) =>
        failures.delete(`${path}:${uidvalidity}:${uid}`),
      markSkipped: () => undefined,
      saveCursors: () => undefined,
      saveInitialSync: () => undefined,
    } as unknown as AccountStore;
    const applier = {
      cursors: new Map(),
      initialSync: null,
      state: { env, account: { accountId: id } },
      async apply(change: Change): Promise<ChangeResult> {
        if (change.type === 'flags') throw new Error('SQLITE_TOOBIG: string or blob too big');
        applied.push(change.type);
        return emptyResult();
      },
    } as unknown as ChangeApplier;
    const deps = {
      applier,
      store,
      commit: (result: ChangeResult) => writeResult(env, result),
      skipped: async () => undefined,
    };
    const flags: Change = { type: 'flags', path: 'Archive', uidvalidity: 1, updates: [{ uid: 1, flags: ['\\Seen'] }] };
    const cursor: Change = { type: 'cursor', path: 'Archive', uidvalidity: 1, last_uid: 5, highest_modseq: null };
    // Refused until it has failed often enough, then passed over with last_error naming the folder.
    await expect(runChanges(deps, [flags, cursor])).rejects.toThrow(/TOOBIG/);
    await expect(runChanges(deps, [flags, cursor])).rejects.toThrow(/TOOBIG/);
    expect(await lastError(id)).toBeNull();
    await runChanges(deps, [flags, cursor]);
    expect(applied).toEqual(['cursor']);
    expect(await lastError(id)).toMatch(
      /^folder Archive: its flags could not be applied and were passed over: .*TOOBIG/,
    );
  });
});
