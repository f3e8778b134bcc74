// Flags, moves and expunges from other clients, as the account object applies them: an email that
// left every folder waits until each folder was read through, a move reported with its expunge is
// one email.update, and of two identical copies the one being expunged is the one that moves.
import { runDurableObjectAlarm } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import { api, expectError } from './helpers.ts';
import { leased, list, messageIn, outbox, rawMessage, readEveryFolder } from './sync-helpers.ts';

describe('applying changes', () => {
  it('follows flags, moves and expunges from another client', async () => {
    const account = await leased();
    const raw = rawMessage({ subject: 'movable' });
    await account.stub.applyChanges(account.gateway, [
      { type: 'messages', path: 'INBOX', uidvalidity: 1, messages: [messageIn(1, raw)] },
    ]);
    const [email] = (await list(`account_id=${account.id}`)).data;

    await account.stub.applyChanges(account.gateway, [
      { type: 'flags', path: 'INBOX', uidvalidity: 1, updates: [{ uid: 1, flags: ['\\Seen', '\\Flagged'] }] },
    ]);
    let now = (await list(`account_id=${account.id}`)).data[0];
    expect(now).toMatchObject({ id: email.id, unread: false, starred: true });

    // A move: the destination arrives, then the source vanishes.
    await account.stub.applyChanges(account.gateway, [
      { type: 'messages', path: 'Archive', uidvalidity: 1, messages: [messageIn(1, raw, ['\\Seen', '\\Flagged'])] },
      { type: 'vanished', path: 'INBOX', uidvalidity: 1, uids: [1] },
    ]);
    now = (await list(`account_id=${account.id}`)).data;
    expect(now).toHaveLength(1);
    const archive = (await api('GET', `/folders?account_id=${account.id}`)).body.data.find(
      (f: any) => f.role === 'ARCHIVE',
    );
    expect(now[0]).toMatchObject({ id: email.id, role: 'ARCHIVE', folder_ids: [archive.id] });
    expect((await list(`account_id=${account.id}&folder=ARCHIVE`)).data).toHaveLength(1);
    expect((await list(`account_id=${account.id}&folder=INBOX`)).data).toHaveLength(0);

    // The other order (source vanishes first) is also a move: the email waits for evidence.
    await account.stub.applyChanges(account.gateway, [
      { type: 'vanished', path: 'Archive', uidvalidity: 1, uids: [1] },
    ]);
    await account.stub.applyChanges(account.gateway, [
      { type: 'messages', path: 'Projects', uidvalidity: 1, messages: [messageIn(1, raw)] },
    ]);
    await runDurableObjectAlarm(account.stub);
    now = (await list(`account_id=${account.id}`)).data;
    expect(now).toMatchObject([{ id: email.id, role: 'UNKNOWN' }]);

    // An expunge from the last folder: gone once every folder was read since, with email.delete.
    await account.stub.applyChanges(account.gateway, [
      { type: 'vanished', path: 'Projects', uidvalidity: 1, uids: [1] },
    ]);
    await readEveryFolder(account.stub);
    expect((await list(`account_id=${account.id}`)).data).toEqual([]);
    const events = await outbox(account.id);
    expect(events.filter((e) => e.type === 'email.update').length).toBeGreaterThanOrEqual(3);
    expect(events.filter((e) => e.type === 'email.delete').map((e) => e.data.id)).toEqual([email.id]);
    expectError(await api('GET', `/emails/${email.id}`), 404, 'not_found');
  });

  it('keeps an email in no folder until every folder was read through by a pass begun after it left', async () => {
    const account = await leased();
    const raw = rawMessage({ subject: 'waits for evidence' });
    await account.stub.applyChanges(account.gateway, [
      { type: 'messages', path: 'INBOX', uidvalidity: 1, messages: [messageIn(3, raw)] },
    ]);
    const [email] = (await list(`account_id=${account.id}`)).data;
    const before = await account.stub.orphanState();
    expect(before.waiting).toBe(false);
    const left = await account.stub.applyChanges(account.gateway, [
      { type: 'vanished', path: 'INBOX', uidvalidity: 1, uids: [3] },
    ]);
    if (!left.ok) throw new Error('refused');
    const { mark } = left.value.orphans;
    expect(left.value.orphans.waiting).toBe(true);
    expect(mark).toBeGreaterThan(before.mark);
    const cursors = await account.stub.cursors();
    const passed = (path: string, started: number, listed = started) => ({
      type: 'passed' as const,
      listed,
      folders: [{ path, uidvalidity: 1, started }],
    });
    // Passes begun before the gateway was told the mark prove nothing; nor do passes over only some
    // folders, nor passes without a listing begun after it left; however long it takes.
    await account.stub.applyChanges(
      account.gateway,
      cursors.map((c) => passed(c.path, before.mark)),
    );
    await account.stub.applyChanges(
      account.gateway,
      cursors.filter((c) => c.path !== 'Projects/2026').map((c) => passed(c.path, mark, before.mark)),
    );
    await account.stub.applyChanges(account.gateway, [passed('Projects/2026', mark, before.mark)]);
    await runDurableObjectAlarm(account.stub);
    expect((await list(`account_id=${account.id}`)).data.map((e: any) => e.id)).toEqual([email.id]);
    // A gateway claiming a mark it was never told is not believed either.
    await account.stub.applyChanges(account.gateway, [passed('Projects/2026', mark + 1_000_000, before.mark)]);
    await runDurableObjectAlarm(account.stub);
    expect((await list(`account_id=${account.id}`)).data).toHaveLength(1);

    // The other side of the move arrives late: same email, one email.update, no delete.
    await account.stub.applyChanges(account.gateway, [
      { type: 'messages', path: 'Archive', uidvalidity: 1, messages: [messageIn(7, raw)] },
    ]);
    expect((await list(`account_id=${account.id}`)).data).toMatchObject([{ id: email.id, role: 'ARCHIVE' }]);
    await readEveryFolder(account.stub);
    expect((await account.stub.orphanState()).waiting).toBe(false);
    expect((await outbox(account.id)).filter((e) => e.type === 'email.delete')).toEqual([]);

    // Left again: deleted once the evidence is complete.
    await account.stub.applyChanges(account.gateway, [
      { type: 'vanished', path: 'Archive', uidvalidity: 1, uids: [7] },
    ]);
    await account.stub.applyChanges(
      account.gateway,
      cursors.map((c) => passed(c.path, mark)),
    );
    await runDurableObjectAlarm(account.stub);
    expect((await list(`account_id=${account.id}`)).data).toHaveLength(1);
    await readEveryFolder(account.stub);
    expect((await list(`account_id=${account.id}`)).data).toEqual([]);
    expect((await outbox(account.id)).filter((e) => e.type === 'email.delete').map((e) => e.data.id)).toEqual([
      email.id,
    ]);
    expect((await account.stub.orphanState()).waiting).toBe(false);
  });

  it('makes a move the gateway reports with its expunge ahead one email.update, with the final folders', async () => {
    const account = await leased();
    const raw = rawMessage({ subject: 'moved once' });
    await account.stub.applyChanges(account.gateway, [
      { type: 'messages', path: 'INBOX', uidvalidity: 1, messages: [messageIn(4, raw)] },
    ]);
    const [email] = (await list(`account_id=${account.id}`)).data;
    const updatesBefore = (await outbox(account.id)).filter((e) => e.type === 'email.update').length;
    await account.stub.applyChanges(account.gateway, [
      {
        type: 'messages',
        path: 'Archive',
        uidvalidity: 1,
        messages: [messageIn(9, raw)],
        vanishing: [{ path: 'INBOX', uidvalidity: 1, uids: [4] }],
      },
      { type: 'vanished', path: 'INBOX', uidvalidity: 1, uids: [4] },
    ]);
    const archive = (await api('GET', `/folders?account_id=${account.id}`)).body.data.find(
      (f: any) => f.role === 'ARCHIVE',
    );
    const updates = (await outbox(account.id)).filter((e) => e.type === 'email.update').slice(updatesBefore);
    expect(updates.map((e) => [e.data.id, e.data.folder_ids])).toEqual([[email.id, [archive.id]]]);
    expect((await list(`account_id=${account.id}`)).data).toMatchObject([
      { id: email.id, role: 'ARCHIVE', folder_ids: [archive.id] },
    ]);
    await readEveryFolder(account.stub);
    expect((await outbox(account.id)).filter((e) => e.type === 'email.delete')).toEqual([]);
  });

  it('moves the right one of two identical copies: the one the gateway says is being expunged', async () => {
    const account = await leased();
    const raw = rawMessage({ subject: 'twin' });
    // Two copies in one folder are two emails.
    await account.stub.applyChanges(account.gateway, [
      { type: 'messages', path: 'INBOX', uidvalidity: 1, messages: [messageIn(1, raw), messageIn(2, raw)] },
    ]);
    const folders = (await api('GET', `/folders?account_id=${account.id}`)).body.data;
    const folderId = (path: string) => folders.find((f: any) => f.provider_id === path).id;
    const emails = async () => (await list(`account_id=${account.id}`)).data as { id: string; folder_ids: string[] }[];
    const ids = await Promise.all(
      [1, 2].map(
        async (uid) =>
          (await account.db
            .prepare('SELECT email_id FROM email_folders WHERE folder_id = ? AND uid = ?')
            .bind(folderId('INBOX'), uid)
            .first<{ email_id: string }>())!.email_id,
      ),
    );
    expect(new Set(ids).size).toBe(2);

    // The second copy moves first (its arrival is reported before its expunge, naming the place it leaves).
    for (const [uid, destination] of [
      [2, 'Archive'],
      [1, 'Projects'],
    ] as const) {
      await account.stub.applyChanges(account.gateway, [
        {
          type: 'messages',
          path: destination,
          uidvalidity: 1,
          messages: [messageIn(1, raw)],
          vanishing: [{ path: 'INBOX', uidvalidity: 1, uids: [uid] }],
        },
        { type: 'vanished', path: 'INBOX', uidvalidity: 1, uids: [uid] },
      ]);
      await readEveryFolder(account.stub);
      const moved = (await emails()).find((e) => e.id === ids[uid - 1]);
      expect(moved?.folder_ids, `the copy of UID ${uid}`).toEqual([folderId(destination)]);
    }
    expect(await emails()).toHaveLength(2);

    // One of them leaves Archive and comes back under a new UID before its expunge is reported.
    await account.stub.applyChanges(account.gateway, [
      {
        type: 'messages',
        path: 'Archive',
        uidvalidity: 1,
        messages: [messageIn(7, raw)],
        vanishing: [{ path: 'Archive', uidvalidity: 1, uids: [1] }],
      },
      { type: 'vanished', path: 'Archive', uidvalidity: 1, uids: [1] },
    ]);
    await readEveryFolder(account.stub);
    expect((await emails()).find((e) => e.id === ids[1])?.folder_ids).toEqual([folderId('Archive')]);
    expect(await emails()).toHaveLength(2);
    expect((await outbox(account.id)).filter((e) => e.type === 'email.delete' || e.type === 'email.new')).toHaveLength(
      2,
    );
    expect((await outbox(account.id)).filter((e) => e.type === 'email.delete')).toEqual([]);
  });
});
