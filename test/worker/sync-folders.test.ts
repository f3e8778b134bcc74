// How the account object keeps folders and email ids through what a server does to folders:
// renames (onto a deleted folder's path, with a new UIDVALIDITY), resets, snapshots, deletions.
import { runDurableObjectAlarm, runInDurableObject } from 'cloudflare:test';
import { describe, expect, it, vi } from 'vitest';
import { openSocket } from './gateway-socket.ts';
import { api } from './helpers.ts';
import {
  createSyncedAccount,
  readEveryFolder,
  folder,
  leased,
  list,
  messageIn,
  outbox,
  rawMessage,
  STANDARD_FOLDERS,
} from './sync-helpers.ts';

/** The account's email ids by subject (each test message has its own subject). */
const emailIdsBySubject = async (accountId: string) =>
  Object.fromEntries(((await list(`account_id=${accountId}`)).data as any[]).map((e) => [e.subject, e.id]));

/** The account's folder ids by server path. */
const folderIdsByPath = async (accountId: string) =>
  Object.fromEntries(
    ((await api('GET', `/folders?account_id=${accountId}`)).body.data as any[]).map((f) => [f.provider_id, f.id]),
  );

describe('folder identity', () => {
  it('follows a rename onto a path whose folder was just deleted, and a rename whose old path was reused at once', async () => {
    const base = [folder('INBOX', null, 1, 10), folder('Old', null, 1, 20), folder('Trips', null, 1, 30)];
    const account = await createSyncedAccount(undefined, base);
    expect((await account.stub.acquireLease('gw-1')).granted).toBe(true);
    const apply = (changes: Parameters<typeof account.stub.applyChanges>[1]) =>
      account.stub.applyChanges('gw-1', changes);
    await apply([
      { type: 'messages', path: 'Old', uidvalidity: 20, messages: [messageIn(1, rawMessage({ subject: 'kept 1' }))] },
      { type: 'messages', path: 'Old', uidvalidity: 20, messages: [messageIn(2, rawMessage({ subject: 'kept 2' }))] },
    ]);
    const folders = async () =>
      Object.fromEntries(
        ((await api('GET', `/folders?account_id=${account.id}`)).body.data as any[]).map((f) => [f.provider_id, f.id]),
      );
    const before = await folders();
    const emails = async () =>
      ((await list(`account_id=${account.id}`)).data as any[]).map((e) => [e.subject, e.id, e.folder_ids]).sort();
    const mail = await emails();
    await apply([{ type: 'folders', folders: [base[0]!, folder('Old', null, 3, 20), base[2]!] }]);

    // Trips deleted, then Old renamed to Trips, both between two listings: Trips carries Old's UIDVALIDITY.
    await apply([
      { type: 'folders', folders: [base[0]!, folder('Trips', null, 3, 20)] },
      { type: 'cursor', path: 'Trips', uidvalidity: 20, last_uid: 2, highest_modseq: '1' },
    ]);
    let now = await folders();
    expect(now).toEqual({ INBOX: before.INBOX, Trips: before.Old });
    expect(await emails()).toEqual(mail.map(([s, id]) => [s, id, [before.Old]]));

    // Trips renamed to Later and a new Trips created at once: one listing shows both.
    await apply([
      { type: 'folders', folders: [base[0]!, folder('Trips', null, 1, 40), folder('Later', null, 3, 20)] },
      { type: 'cursor', path: 'Trips', uidvalidity: 40, last_uid: 0, highest_modseq: '1' },
    ]);
    now = await folders();
    expect(now.Later).toBe(before.Old);
    expect(now.Trips).toBeTruthy();
    expect(now.Trips).not.toBe(before.Old);
    expect(await emails()).toEqual(mail.map(([s, id]) => [s, id, [before.Old]]));
    const stale = await account.db
      .prepare('SELECT COUNT(*) AS n FROM email_folders WHERE account_id = ? AND uid < 0')
      .bind(account.id)
      .first<{ n: number }>();
    expect(stale!.n).toBe(0);
    const types = (await outbox(account.id)).map((e) => e.type);
    expect(types.filter((t) => t.startsWith('email.') && !t.startsWith('email.folder'))).toEqual([
      'email.new',
      'email.new',
    ]);
    expect(types.filter((t) => t === 'email.folder.delete')).toHaveLength(1);
    expect(types.filter((t) => t === 'email.folder.create')).toHaveLength(1);
  });

  it('follows a rename that also renumbers the folder (Courier): same folder id, same email ids', async () => {
    const base = [folder('INBOX', null, 1, 10), folder('Reports', null, 1, 50)];
    const account = await createSyncedAccount(undefined, base);
    expect((await account.stub.acquireLease('gw-1')).granted).toBe(true);
    const apply = (changes: Parameters<typeof account.stub.applyChanges>[1]) =>
      account.stub.applyChanges('gw-1', changes);
    const raw = rawMessage({ subject: 'report' });
    await apply([
      { type: 'messages', path: 'Reports', uidvalidity: 50, messages: [messageIn(1, raw)] },
      { type: 'folders', folders: [base[0]!, folder('Reports', null, 2, 50)] },
    ]);
    const before = await folderIdsByPath(account.id);
    const [email] = (await list(`account_id=${account.id}`)).data;
    const eventsBefore = (await outbox(account.id)).length;

    await apply([
      { type: 'folders', folders: [base[0]!, folder('Reports 2026', null, 2, 51)] },
      { type: 'messages', path: 'Reports 2026', uidvalidity: 51, messages: [messageIn(1, raw)] },
      { type: 'cursor', path: 'Reports 2026', uidvalidity: 51, last_uid: 1, highest_modseq: '1' },
    ]);
    await readEveryFolder(account.stub);
    expect(await folderIdsByPath(account.id)).toEqual({ INBOX: before.INBOX, 'Reports 2026': before.Reports });
    expect((await list(`account_id=${account.id}`)).data).toMatchObject([
      { id: email.id, folder_ids: [before.Reports] },
    ]);
    const types = (await outbox(account.id)).slice(eventsBefore).map((e) => e.type);
    expect(types).toEqual(['email.folder.update']);
  });

  it('takes a reset to the UIDVALIDITY of a deleted folder for a reset, not for a rename onto the path', async () => {
    const base = [folder('INBOX', null, 1, 10), folder('Old', null, 1, 20), folder('Drafts', '\\Drafts', 1, 30)];
    const account = await createSyncedAccount(undefined, base);
    expect((await account.stub.acquireLease('gw-1')).granted).toBe(true);
    const apply = (changes: Parameters<typeof account.stub.applyChanges>[1]) =>
      account.stub.applyChanges('gw-1', changes);
    const drafts = [1, 2].map((i) => rawMessage({ subject: `draft ${i}` }));
    await apply([
      { type: 'messages', path: 'Old', uidvalidity: 20, messages: [messageIn(1, rawMessage({ subject: 'old' }))] },
      { type: 'messages', path: 'Drafts', uidvalidity: 30, messages: drafts.map((r, i) => messageIn(i + 1, r)) },
      { type: 'folders', folders: [base[0]!, folder('Old', null, 2, 20), folder('Drafts', '\\Drafts', 3, 30)] },
    ]);
    const before = await emailIdsBySubject(account.id);
    const draftsId = (await folderIdsByPath(account.id)).Drafts;

    // Old deleted and Drafts renumbered to the value Old had, between two listings; Drafts is read again.
    await apply([
      { type: 'folders', folders: [base[0]!, folder('Drafts', '\\Drafts', 3, 20)] },
      { type: 'messages', path: 'Drafts', uidvalidity: 20, messages: drafts.map((r, i) => messageIn(i + 1, r)) },
      { type: 'cursor', path: 'Drafts', uidvalidity: 20, last_uid: 2, highest_modseq: '1' },
      { type: 'folders', folders: [base[0]!, folder('Drafts', '\\Drafts', 3, 20)] },
    ]);
    await readEveryFolder(account.stub);
    expect((await folderIdsByPath(account.id)).Drafts).toBe(draftsId);
    expect(await emailIdsBySubject(account.id)).toEqual({ 'draft 1': before['draft 1'], 'draft 2': before['draft 2'] });
    const deleted = (await outbox(account.id)).filter((e) => e.type === 'email.delete');
    expect(deleted.map((e: any) => e.data.id)).toEqual([before.old]);
  });

  it('takes a folder renamed onto the path of one deleted a listing earlier for that rename', async () => {
    const base = [folder('INBOX', null, 1, 10), folder('Receipts', null, 3, 40), folder('Projects', null, 3, 50)];
    const account = await createSyncedAccount(undefined, base);
    expect((await account.stub.acquireLease('gw-1')).granted).toBe(true);
    const apply = (changes: Parameters<typeof account.stub.applyChanges>[1]) =>
      account.stub.applyChanges('gw-1', changes);
    const receipts = [1, 2].map((i) => rawMessage({ subject: `receipt ${i}` }));
    const projects = [1, 2].map((i) => rawMessage({ subject: `project ${i}` }));
    await apply([
      { type: 'messages', path: 'Receipts', uidvalidity: 40, messages: receipts.map((r, i) => messageIn(i + 3, r)) },
      { type: 'messages', path: 'Projects', uidvalidity: 50, messages: projects.map((r, i) => messageIn(i + 3, r)) },
      { type: 'folders', folders: [base[0]!, folder('Receipts', null, 5, 40), folder('Projects', null, 5, 50)] },
    ]);
    const before = await emailIdsBySubject(account.id);
    const projectsId = (await folderIdsByPath(account.id)).Projects;

    // Receipts deleted (one listing lacks it), then Projects renamed to Receipts: the path comes back
    // with Projects' UIDVALIDITY and as many messages as both had. It is Projects, not Receipts reset.
    const applied = await apply([
      { type: 'folders', folders: [base[0]!, folder('Projects', null, 5, 50)] },
      { type: 'folders', folders: [base[0]!, folder('Receipts', null, 5, 50)] },
    ]);
    expect(await folderIdsByPath(account.id)).toEqual({ INBOX: expect.any(String), Receipts: projectsId });
    // Known mail of the renamed folder is not read again, and an expunge in it is heard.
    const cursor = applied.ok ? applied.value.cursors.find((c) => c.path === 'Receipts') : null;
    expect(cursor).toMatchObject({ uidvalidity: 50, last_uid: 4 });
    await apply([{ type: 'vanished', path: 'Receipts', uidvalidity: 50, uids: [4] }]);
    await readEveryFolder(account.stub);
    expect(await emailIdsBySubject(account.id)).toEqual({ 'project 1': before['project 1'] });
  });

  it('reconciles a snapshot and survives a UIDVALIDITY change without changing ids', async () => {
    const account = await leased();
    const raws = [1, 2, 3].map((i) => rawMessage({ subject: `m${i}` }));
    await account.stub.applyChanges(account.gateway, [
      { type: 'messages', path: 'INBOX', uidvalidity: 1, messages: raws.map((r, i) => messageIn(i + 1, r)) },
    ]);
    const before = Object.fromEntries((await list(`account_id=${account.id}`)).data.map((e: any) => [e.subject, e.id]));

    await account.stub.applyChanges(account.gateway, [
      { type: 'snapshot', path: 'INBOX', uidvalidity: 1, uids: [1, 3] },
    ]);
    await readEveryFolder(account.stub);
    expect((await list(`account_id=${account.id}`)).data.map((e: any) => e.subject).sort()).toEqual(['m1', 'm3']);

    const renumbered = STANDARD_FOLDERS().map((f) => (f.path === 'INBOX' ? folder('INBOX', null, 3, 99) : f));
    await account.stub.applyChanges(account.gateway, [
      { type: 'folders', folders: renumbered },
      { type: 'messages', path: 'INBOX', uidvalidity: 99, messages: [messageIn(1, raws[0]!), messageIn(2, raws[2]!)] },
      { type: 'cursor', path: 'INBOX', uidvalidity: 99, last_uid: 2, highest_modseq: '5' },
    ]);
    await readEveryFolder(account.stub);
    const after = Object.fromEntries((await list(`account_id=${account.id}`)).data.map((e: any) => [e.subject, e.id]));
    expect(after).toEqual({ m1: before.m1, m3: before.m3 });
    expect((await account.stub.cursors()).find((c) => c.path === 'INBOX')).toMatchObject({
      uidvalidity: 99,
      last_uid: 2,
    });
  });

  it('ends a re-read only once the folder is read up to where it ended when the re-read began', async () => {
    const account = await leased();
    const raws = [1, 2, 3].map((i) => rawMessage({ subject: `r${i}` }));
    await account.stub.applyChanges(account.gateway, [
      { type: 'messages', path: 'INBOX', uidvalidity: 1, messages: raws.map((r, i) => messageIn(i + 1, r)) },
    ]);
    const before = Object.fromEntries((await list(`account_id=${account.id}`)).data.map((e: any) => [e.subject, e.id]));
    const mark = (await outbox(account.id)).length;
    // Renumbered with three messages (UIDNEXT 4); a pass sends a cursor before reading them (a hold).
    const renumbered = STANDARD_FOLDERS().map((f) => (f.path === 'INBOX' ? folder('INBOX', null, 4, 99) : f));
    await account.stub.applyChanges(account.gateway, [
      { type: 'folders', folders: renumbered },
      { type: 'cursor', path: 'INBOX', uidvalidity: 99, last_uid: 0, highest_modseq: null },
    ]);
    expect((await account.stub.cursors()).find((c) => c.path === 'INBOX')).toMatchObject({ resync: true });
    // Nothing was detached: every email still has its folder, no event.
    expect((await list(`account_id=${account.id}`)).data.every((e: any) => e.folders.length === 1)).toBe(true);
    // The re-read then finds them all again: same ids, and only now it ends.
    await account.stub.applyChanges(account.gateway, [
      { type: 'messages', path: 'INBOX', uidvalidity: 99, messages: raws.map((r, i) => messageIn(i + 1, r)) },
      { type: 'cursor', path: 'INBOX', uidvalidity: 99, last_uid: 3, highest_modseq: null },
    ]);
    const cursor = (await account.stub.cursors()).find((c) => c.path === 'INBOX');
    expect(cursor?.resync).toBeUndefined();
    const after = Object.fromEntries((await list(`account_id=${account.id}`)).data.map((e: any) => [e.subject, e.id]));
    expect(after).toEqual(before);
    expect(
      (await outbox(account.id))
        .slice(mark)
        .filter((e) => e.type.startsWith('email.') && !e.type.startsWith('email.folder')),
    ).toEqual([]);
  });

  it('refreshes an email a renumbered folder lost but another folder keeps, with one email.update, in the alarm', async () => {
    const account = await leased();
    // One email, in the inbox and (starred) in Archive.
    const raw = rawMessage({ subject: 'kept in the inbox' });
    await account.stub.applyChanges(account.gateway, [
      { type: 'messages', path: 'INBOX', uidvalidity: 1, messages: [messageIn(1, raw)] },
      { type: 'messages', path: 'Archive', uidvalidity: 1, messages: [messageIn(1, raw, ['\\Flagged'])] },
    ]);
    const folderIds = await folderIdsByPath(account.id);
    const [email] = (await list(`account_id=${account.id}`)).data as any[];
    expect(email).toMatchObject({ starred: true, folder_ids: [folderIds.INBOX, folderIds.Archive].sort() });
    const mark = (await outbox(account.id)).length;

    // Archive renumbered and empty: its re-read ends at once, without the email.
    const renumbered = STANDARD_FOLDERS().map((f) =>
      f.path === 'Archive' ? folder('Archive', '\\Archive', 1, 77) : f,
    );
    await account.stub.applyChanges(account.gateway, [
      { type: 'folders', folders: renumbered },
      { type: 'cursor', path: 'Archive', uidvalidity: 77, last_uid: 0, highest_modseq: null },
    ]);
    const waiting = (await list(`account_id=${account.id}`)).data as any[];
    expect(waiting.map((e) => [e.id, e.folder_ids])).toEqual([[email.id, [folderIds.INBOX]]]);
    const updates = async () => (await outbox(account.id)).slice(mark).filter((e) => e.type === 'email.update');
    expect(await updates()).toEqual([]);

    await runDurableObjectAlarm(account.stub);
    const [update, ...more] = await updates();
    expect(more).toEqual([]);
    expect(update!.data).toMatchObject({ id: email.id, folder_ids: [folderIds.INBOX], starred: false });
    expect((await list(`account_id=${account.id}`)).data).toMatchObject([{ id: email.id, starred: false }]);
  });

  it('re-reads a renumbered folder without mail from before the connect, but with mail of the connect second', async () => {
    const account = await leased();
    const connectedAt = Number(
      await runInDurableObject(
        account.stub,
        (_instance, state) =>
          state.storage.sql.exec<{ value: string }>("SELECT value FROM meta WHERE key = 'connected_at_ms'").one().value,
      ),
    );
    const second = Math.floor(connectedAt / 1000) * 1000;
    const at = (ms: number, uid: number, subject: string) => ({
      ...messageIn(uid, rawMessage({ subject })),
      internal_date: new Date(ms).toISOString(),
    });
    const renumbered = STANDARD_FOLDERS().map((f) => (f.path === 'INBOX' ? folder('INBOX', null, 3, 77) : f));
    await account.stub.applyChanges(account.gateway, [
      { type: 'folders', folders: renumbered },
      {
        type: 'messages',
        path: 'INBOX',
        uidvalidity: 77,
        // INTERNALDATE has whole seconds: the second message may have arrived just after the connect.
        messages: [at(second - 1000, 1, 'before'), at(second, 2, 'connect second')],
      },
      { type: 'cursor', path: 'INBOX', uidvalidity: 77, last_uid: 2, highest_modseq: '5' },
    ]);
    expect((await list(`account_id=${account.id}`)).data.map((e: any) => e.subject)).toEqual(['connect second']);
  });

  it('leaves a folder the API deleted out of listings begun before the deletion ended, not out of later ones', {
    timeout: 30_000,
  }, async () => {
    const account = await leased('gw-folder-stamps');
    const socket = await openSocket('gw-folder-stamps');
    const doomed = (await folderIdsByPath(account.id))['Projects/2026'];
    const deleted = api('DELETE', `/${account.id}/folders/${doomed}`);
    await vi.waitFor(() => expect(socket.requests().some((r) => r.request.op === 'folder')).toBe(true), {
      timeout: 10_000,
    });
    const request = socket.requests().find((r) => r.request.op === 'folder');
    const ended = 5_000;
    const result = { path: null, status: null, listed_after: ended };
    socket.ws.send(JSON.stringify({ type: 'response', id: request.id, ok: true, result }));
    expect((await deleted).status).toBe(200);
    expect(await folderIdsByPath(account.id)).not.toHaveProperty('Projects/2026');

    // A listing the gateway began before the deletion ended, applied after it: the folder stays gone.
    const before = STANDARD_FOLDERS();
    await account.stub.applyChanges(account.gateway, [{ type: 'folders', folders: before, began: ended - 1 }]);
    expect(await folderIdsByPath(account.id)).not.toHaveProperty('Projects/2026');
    // One begun after it shows the server as it is: another client made the folder again.
    await account.stub.applyChanges(account.gateway, [{ type: 'folders', folders: before, began: ended + 1 }]);
    const again = (await folderIdsByPath(account.id))['Projects/2026'];
    expect(again).toBeDefined();
    expect(again).not.toBe(doomed);
    socket.ws.close(1000, 'done');
  });

  it('reports folder changes with events; a folder is deleted once a second listing confirms it', async () => {
    const account = await leased();
    const listing = [...STANDARD_FOLDERS().filter((f) => f.path !== 'Projects/2026'), folder('Receipts', null)];
    await account.stub.applyChanges(account.gateway, [{ type: 'folders', folders: listing }]);
    expect((await outbox(account.id)).map((e) => e.type)).toEqual(['email.folder.create']);
    await account.stub.applyChanges(account.gateway, [{ type: 'folders', folders: listing }]);
    const types = (await outbox(account.id)).map((e) => e.type).sort();
    expect(types).toEqual(['email.folder.create', 'email.folder.delete']);
  });
});
