// New mail applied by the account object: folders made at connect, messages taken in once with their
// blobs and events, replies naming the email they answer, and a large change cut into D1 batches.
import { describe, expect, it } from 'vitest';
import { newId } from '../../worker/lib/ids.ts';
import { d1Batches } from '../../worker/sync/commit.ts';
import { api, expectError } from './helpers.ts';
import { createSyncedAccount, leased, list, messageIn, outbox, rawMessage, STANDARD_FOLDERS } from './sync-helpers.ts';

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
