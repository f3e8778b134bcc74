// The account object applying a gateway's changes: D1 rows, R2 blobs and outbox events, idempotently.
import { runDurableObjectAlarm, runInDurableObject } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import type { AccountObject } from '../../worker/durable/account-object.ts';
import { newId } from '../../worker/lib/ids.ts';
import { d1Batches } from '../../worker/sync/commit.ts';
import { isTransient } from '../../worker/sync/run-changes.ts';
import { api, expectError } from './helpers.ts';
import {
  createSyncedAccount,
  gatewayCall,
  leased,
  list,
  messageIn,
  outbox,
  rawMessage,
  STANDARD_FOLDERS,
  readEveryFolder,
} from './sync-helpers.ts';

describe('applying changes', () => {
  it('creates folders with roles and parents at connect, silently', async () => {
    const { id } = await leased();
    const res = await api('GET', `/folders?account_id=${id}`);
    expect(res.status).toBe(200);
    expect(res.body.object).toBe('Folders');
    const byName = Object.fromEntries(res.body.data.map((f: any) => [f.provider_id, f]));
    expect(
      Object.values(byName)
        .map((f: any) => f.role)
        .sort(),
    ).toEqual(['ARCHIVE', 'DRAFTS', 'INBOX', 'SENT', 'SPAM', 'TRASH', 'UNKNOWN', 'UNKNOWN']);
    expect(byName['Projects/2026'].parent_id).toBe(byName['Projects'].id);
    expect(byName['Projects/2026'].name).toBe('2026');
    const one = await api('GET', `/${id}/folders/${byName['INBOX'].id}`);
    expect(one.body).toMatchObject({
      object: 'Folder',
      id: byName['INBOX'].id,
      account_id: id,
      role: 'INBOX',
      name: 'INBOX',
    });
    expect((await outbox(id)).filter((e) => e.type.startsWith('email.folder'))).toEqual([]);
  });

  it('ingests new messages once, with blobs, and ignores what was there before connecting', async () => {
    const account = await createSyncedAccount(undefined, STANDARD_FOLDERS(5));
    await account.stub.acquireLease('gw-1');
    const old = messageIn(4, rawMessage({ subject: 'before connect' }));
    const fresh = messageIn(5, rawMessage({ subject: 'after connect', cc: 'Carol <carol@example.test>' }));
    const withFile = messageIn(
      6,
      rawMessage({
        subject: 'with file',
        attachment: { name: 'Report.PDF', type: 'application/pdf', content: '%PDF-1.4 hello' },
      }),
      ['\\Seen'],
    );
    const batch = [{ type: 'messages' as const, path: 'INBOX', uidvalidity: 1, messages: [old, fresh, withFile] }];
    const applied = await account.stub.applyChanges('gw-1', batch);
    expect(applied.ok && applied.value.cursors.find((c) => c.path === 'INBOX')?.last_uid).toBe(6);
    await account.stub.applyChanges('gw-1', batch); // a retried batch changes nothing

    const listed = await list(`account_id=${account.id}`);
    expect(listed.data.map((e: any) => e.subject).sort()).toEqual(['after connect', 'with file']);
    const events = await outbox(account.id);
    expect(events.filter((e) => e.type === 'email.new')).toHaveLength(2);

    const file = listed.data.find((e: any) => e.subject === 'with file');
    expect(file).toMatchObject({
      object: 'Email',
      role: 'INBOX',
      unread: false,
      starred: false,
      has_attachments: true,
    });
    expect(file.attachments[0]).toMatchObject({
      name: 'Report.PDF',
      extension: 'pdf',
      size: 14,
      mime: 'application/pdf',
    });
    const bytes = await exports().fetchRaw(`/emails/${file.id}/attachments/${file.attachments[0].id}`);
    expect(bytes.status).toBe(200);
    expect(bytes.headers.get('Content-Type')).toBe('application/pdf');
    expect(bytes.headers.get('Content-Disposition')).toContain('Report.PDF');
    expect(await bytes.text()).toBe('%PDF-1.4 hello');
    const raw = await exports().fetchRaw(`/emails/${file.id}/raw`);
    expect(raw.headers.get('Content-Type')).toBe('message/rfc822');
    expect(await raw.text()).toContain('Subject: with file');

    const single = await api('GET', `/${account.id}/emails/${file.id}`);
    expect(single.body).toMatchObject({ object: 'Email', id: file.id, is_unread: false, is_complete: true });
    expect(single.body.from_attendee).toEqual({
      identifier: 'bob@example.test',
      display_name: 'Bob Sender',
      identifier_type: 'EMAIL_ADDRESS',
    });
    expect(single.body.headers.find((h: any) => h.name.toLowerCase() === 'subject').value).toBe('with file');
    expectError(await api('GET', `/${newId('account')}/emails/${file.id}`), 404, 'not_found');
  });

  it('names the answered email in the in_reply_to of email.new, within a batch and across batches', async () => {
    const account = await leased();
    const parent = rawMessage({ subject: 'question', messageId: '<q-1@example.test>' });
    const reply = rawMessage({
      subject: 'Re: question',
      messageId: '<a-1@example.test>',
      inReplyTo: '<q-1@example.test>',
      references: '<q-1@example.test>',
    });
    const late = rawMessage({
      subject: 'Re: question',
      messageId: '<a-2@example.test>',
      inReplyTo: '<a-1@example.test>',
    });
    await account.stub.applyChanges(account.gateway, [
      { type: 'messages', path: 'INBOX', uidvalidity: 1, messages: [messageIn(1, parent), messageIn(2, reply)] },
    ]);
    await account.stub.applyChanges(account.gateway, [
      { type: 'messages', path: 'INBOX', uidvalidity: 1, messages: [messageIn(3, late)] },
    ]);
    const news = (await outbox(account.id)).filter((e) => e.type === 'email.new').map((e) => e.data);
    const byMid = Object.fromEntries(news.map((e: any) => [e.message_id, e]));
    expect(byMid['<q-1@example.test>'].in_reply_to).toBeNull();
    expect(byMid['<a-1@example.test>'].in_reply_to).toEqual({
      message_id: '<q-1@example.test>',
      id: byMid['<q-1@example.test>'].id,
    });
    expect(byMid['<a-2@example.test>'].in_reply_to).toEqual({
      message_id: '<a-1@example.test>',
      id: byMid['<a-1@example.test>'].id,
    });
    // The event says what the API says.
    const listed = (await list(`account_id=${account.id}`)).data.find(
      (e: any) => e.message_id === '<a-2@example.test>',
    );
    expect(listed.in_reply_to).toEqual(byMid['<a-2@example.test>'].in_reply_to);
  });

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

  it('records a message that fails, and forgets the failure once it goes through', async () => {
    const account = await leased();
    const raw = rawMessage({ subject: 'staged late' });
    const bytes = new TextEncoder().encode(raw);
    const sha = [...new Uint8Array(await crypto.subtle.digest('SHA-256', bytes))]
      .map((b) => b.toString(16).padStart(2, '0'))
      .join('');
    const change = {
      type: 'messages' as const,
      path: 'INBOX',
      uidvalidity: 1,
      messages: [{ ...messageIn(1, raw), raw: '', staged: sha }],
    };
    const failures = () =>
      runInDurableObject(account.stub, (_instance, state) =>
        state.storage.sql.exec('SELECT uid, attempts FROM failed_messages').toArray(),
      );
    // Its staged source is not in R2 yet: the change fails and the failure is counted.
    // (Called inside the object: a rejection across RPC would be reported as uncaught.)
    await expect(
      runInDurableObject(account.stub, (instance: AccountObject) => instance.applyChanges(account.gateway, [change])),
    ).rejects.toThrow(/staged source/);
    expect(await failures()).toEqual([{ uid: 1, attempts: 1 }]);
    await env.BLOBS.put(`accounts/${account.id}/staged/${sha}.eml`, bytes);
    await account.stub.applyChanges(account.gateway, [change]);
    expect((await list(`account_id=${account.id}`)).data.map((e: any) => e.subject)).toEqual(['staged late']);
    expect(await failures()).toEqual([]);
  });

  it('tells storage hiccups, retried without counting, from failures the message causes', () => {
    expect(isTransient(new Error('D1_ERROR: Network connection lost.'))).toBe(true);
    expect(isTransient(new Error('D1 DB is overloaded. Requests queued for too long.'))).toBe(true);
    expect(isTransient(new Error('get: We encountered an internal error. Please try again.'))).toBe(true);
    expect(isTransient(new Error('D1_ERROR: string or blob too big: SQLITE_TOOBIG'))).toBe(false);
    expect(isTransient(new Error('D1_ERROR: UNIQUE constraint failed: SQLITE_CONSTRAINT'))).toBe(false);
    expect(isTransient(new Error('the staged source 00ff is missing'))).toBe(false);
    expect(isTransient(new TypeError("Cannot read properties of undefined (reading 'from')"))).toBe(false);
  });

  it('refuses changes from a gateway that does not hold the lease', async () => {
    const account = await leased('gw-1');
    const refused = await account.stub.applyChanges('gw-2', [
      { type: 'cursor', path: 'INBOX', uidvalidity: 1, last_uid: 1, highest_modseq: null },
    ]);
    expect(refused).toEqual({ ok: false, lease_lost: 'the account is held by gw-1' });
    expect((await account.stub.acquireLease('gw-2')).granted).toBe(false);
  });

  it('records status changes once, with their events', async () => {
    const account = await leased();
    await account.stub.reportStatus(account.gateway, 'disconnected', 'connection refused');
    await account.stub.reportStatus(account.gateway, 'disconnected', 'connection refused');
    await account.stub.reportStatus(account.gateway, 'running', null);
    expect((await outbox(account.id)).map((e) => e.type)).toEqual([
      'account.status.disconnected',
      'account.status.running',
    ]);
    expect((await api('GET', `/accounts/${account.id}`)).body).toMatchObject({ status: 'running', last_error: null });
  });

  it('removes an account with all its emails, folders and blobs, touching nothing else', async () => {
    const keep = await leased();
    const gone = await leased();
    for (const a of [keep, gone]) {
      await a.stub.applyChanges(a.gateway, [
        {
          type: 'messages',
          path: 'INBOX',
          uidvalidity: 1,
          messages: [messageIn(1, rawMessage({ attachment: { name: 'a.txt', type: 'text/plain', content: 'x' } }))],
        },
      ]);
    }
    const res = await api('DELETE', `/accounts/${gone.id}`);
    expect(res.body).toEqual({ object: 'AccountDeleted', id: gone.id });
    expect((await list(`account_id=${gone.id}`)).data).toEqual([]);
    expect((await api('GET', `/folders?account_id=${gone.id}`)).body.data).toEqual([]);
    expectError(await api('GET', `/accounts/${gone.id}`), 404, 'not_found');
    // The purge runs in the object's alarms, a bounded step each.
    while (await runDurableObjectAlarm(gone.stub));
    expect((await env.BLOBS.list({ prefix: `accounts/${gone.id}/` })).objects).toEqual([]);
    // The source and the attachment of the kept email: byte ranges of its change's one segment.
    expect((await env.BLOBS.list({ prefix: `accounts/${keep.id}/` })).objects.map((o) => o.key)).toEqual([
      expect.stringMatching(/\/segments\/[0-9a-f]{40}\.bin$/),
    ]);
    expect((await list(`account_id=${keep.id}`)).data).toHaveLength(1);
    const removed = await env.DB.prepare("SELECT type FROM events WHERE account_id = ? AND type = 'account.remove'")
      .bind(gone.id)
      .all();
    expect(removed.results).toHaveLength(1);
    expect((await gone.stub.acquireLease('gw-9')).granted).toBe(false);
  });
});

describe('the gateway endpoints', () => {
  it('refuse unsigned, wrongly signed or stale calls', async () => {
    expect(
      (
        await gatewayCall(
          '/internal/gateway/heartbeat',
          { gateway_id: 'gw', instance: 'proc-gw', held: [], capacity: 100 },
          'wrong-secret',
        )
      ).status,
    ).toBe(401);
    const unsigned = await (await import('cloudflare:workers')).exports.default.fetch(
      'https://mail.example.com/internal/gateway/heartbeat',
      {
        method: 'POST',
        body: JSON.stringify({ gateway_id: 'gw', held: [] }),
      },
    );
    expect(unsigned.status).toBe(401);
    // An API key is no way in.
    const withKey = await (await import('cloudflare:workers')).exports.default.fetch(
      'https://mail.example.com/internal/gateway/heartbeat',
      {
        method: 'POST',
        headers: { 'X-API-KEY': 'test-admin-key' },
        body: JSON.stringify({ gateway_id: 'gw', held: [] }),
      },
    );
    expect(withKey.status).toBe(401);
  });

  it('lease an account with its decrypted settings and cursors, and apply changes', async () => {
    const account = await createSyncedAccount();
    const heartbeat = await gatewayCall('/internal/gateway/heartbeat', {
      gateway_id: 'gw-http',
      instance: 'proc-gw-http',
      held: [],
      capacity: 100,
    });
    expect(heartbeat.status).toBe(200);
    expect(heartbeat.body.claimable).toContain(account.id);

    const lease = await gatewayCall(`/internal/gateway/accounts/${account.id}/lease`, {
      gateway_id: 'gw-http',
      instance: 'proc-gw-http',
    });
    expect(lease.body).toMatchObject({ granted: true, account_id: account.id });
    expect(lease.body.config.imap).toMatchObject({ host: '127.0.0.1', password: 'secret-imap', user: account.email });
    expect(lease.body.cursors.map((c: any) => c.path)).toContain('INBOX');
    expect(
      (
        await gatewayCall(`/internal/gateway/accounts/${account.id}/lease`, {
          gateway_id: 'other',
          instance: 'proc-other',
        })
      ).body,
    ).toEqual({ granted: false, holder: 'gw-http' });

    const applied = await gatewayCall(`/internal/gateway/accounts/${account.id}/changes`, {
      gateway_id: 'gw-http',
      changes: [
        {
          type: 'messages',
          path: 'INBOX',
          uidvalidity: 1,
          messages: [messageIn(1, rawMessage({ subject: 'over http' }))],
        },
      ],
    });
    expect(applied.status).toBe(200);
    expect(applied.body.cursors.find((c: any) => c.path === 'INBOX').last_uid).toBe(1);
    const lost = await gatewayCall(`/internal/gateway/accounts/${account.id}/changes`, {
      gateway_id: 'other',
      changes: [{ type: 'cursor', path: 'INBOX', uidvalidity: 1, last_uid: 1, highest_modseq: null }],
    });
    expect(lost.status).toBe(409);
    expect(lost.body.type).toBe('errors/lease_lost');

    const again = await gatewayCall('/internal/gateway/heartbeat', {
      gateway_id: 'gw-http',
      instance: 'proc-gw-http',
      held: [account.id],
      capacity: 100,
    });
    expect(again.body.lost).toEqual([]);
    expect(again.body.claimable).not.toContain(account.id);
    expect(
      (
        await gatewayCall('/internal/gateway/heartbeat', {
          gateway_id: 'intruder',
          instance: 'proc-intruder',
          held: [account.id],
          capacity: 100,
        })
      ).body.lost,
    ).toEqual([account.id]);
    // The holder restarted and forgot: it gets its account back at once, nobody else does.
    expect(
      (
        await gatewayCall('/internal/gateway/heartbeat', {
          gateway_id: 'gw-http',
          instance: 'proc-gw-http',
          held: [],
          capacity: 100,
        })
      ).body.claimable,
    ).toContain(account.id);
    expect(
      (
        await gatewayCall('/internal/gateway/heartbeat', {
          gateway_id: 'other',
          instance: 'proc-other',
          held: [],
          capacity: 100,
        })
      ).body.claimable,
    ).not.toContain(account.id);
  });

  it('stores no mailbox password in plain text', async () => {
    const account = await createSyncedAccount();
    const row = await env.DB.prepare('SELECT * FROM accounts WHERE id = ?').bind(account.id).first();
    const dump = JSON.stringify(row);
    expect(dump).not.toContain('secret-imap');
    expect(dump).not.toContain('secret-smtp');
    // Sealed with AES-GCM under a named key: v2.<key id>.<iv>.<ciphertext>.
    expect(String(row?.credentials)).toMatch(/^v2\.[0-9a-f]{8}\./);
  });
});

/** Fetches through the API that are not JSON. */
function exports() {
  return {
    fetchRaw: async (path: string) => {
      const { exports: workerExports } = await import('cloudflare:workers');
      return workerExports.default.fetch(`https://mail.example.com/api/v1${path}`, {
        headers: { 'X-API-KEY': 'test-admin-key' },
      });
    },
  };
}

describe('cutting a large change into D1 batches', () => {
  const fake = (n: number) => Array.from({ length: n }, (_, i) => ({ i }) as unknown as D1PreparedStatement);

  it('keeps a small change in one transaction', () => {
    expect(d1Batches({ statements: fake(10), unitEnds: [5, 10] }).map((b) => b.length)).toEqual([10]);
  });

  it('cuts only where a message ends, and never splits a message even when it is huge', () => {
    const ends = Array.from({ length: 30 }, (_, i) => (i + 1) * 30);
    const batches = d1Batches({ statements: fake(900), unitEnds: ends });
    expect(batches.map((b) => b.length)).toEqual([390, 390, 120]);
    const huge = d1Batches({ statements: fake(700), unitEnds: [600, 700] });
    expect(huge.map((b) => b.length)).toEqual([600, 100]);
  });
});
