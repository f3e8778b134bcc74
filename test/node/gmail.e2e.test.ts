// End to end against the Gmail emulation (test/gmail): `npm start` (workerd), the real gateway, real
// HTTP. The account's SMTP side is the test Postfix (submission, as alice), since Gmail's SMTP is
// not part of the emulation and verify logs in to both.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { GMAIL_FOLDERS, startGmail, type GmailServer } from '../gmail/gmail-server.ts';
import { startMailServer, type MailServer } from '../mailserver/mailserver.ts';
import { dumpLogsOnFailure, eventually, startService, type Service } from './service.ts';

let gmail: GmailServer;
let mail: MailServer;
let service: Service;
let account: { id: string };
const folderIds = new Map<string, string>();

let counter = 0;
function rfc822(subject: string, extra: string[] = []): { raw: string; messageId: string } {
  const messageId = `<gm-${++counter}-${Date.now()}@remote.test>`;
  const raw = [
    'From: Remote Person <person@remote.test>',
    `To: ${gmail.email}`,
    `Subject: ${subject}`,
    `Message-ID: ${messageId}`,
    `Date: ${new Date().toUTCString()}`,
    ...extra,
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    '',
    `body of ${subject}`,
    '',
  ].join('\r\n');
  return { raw, messageId };
}

async function emailsWith(query: string): Promise<any[]> {
  return (await service.api('GET', `/emails?account_id=${account.id}&limit=250&${query}`)).body.data;
}

async function byMessageId(messageId: string): Promise<any[]> {
  return (await emailsWith('')).filter((e) => e.message_id === messageId);
}

beforeAll(async () => {
  [gmail, mail] = await Promise.all([startGmail({ labels: ['Work'] }), startMailServer()]);
  service = await startService();
  service.startGateway('gw-gmail', { NODE_EXTRA_CA_CERTS: mail.caFile, GATEWAY_POLL_INTERVAL_MS: '1000' });
  await eventually(async () => (await service.api('GET', '/accounts')).status === 200, { what: 'the API' });
});

afterEach((ctx) => dumpLogsOnFailure(ctx, service));

afterAll(async () => {
  await service?.stop();
  await Promise.all([gmail?.stop(), mail?.stop()]);
});

describe('a Gmail mailbox through an app password', () => {
  it('connects, with labels as folders and their roles', async () => {
    const alice = mail.users.find((u) => u.user === 'alice')!;
    const intent = {
      provider: 'imap',
      email: gmail.email,
      password: gmail.password,
      imap_host: gmail.host,
      imap_port: gmail.port,
      imap_encryption: 'NONE',
      smtp_host: mail.host,
      smtp_port: mail.smtpPort,
      smtp_encryption: 'STARTTLS',
      smtp_user: alice.user,
      smtp_password: alice.password,
    };
    const res = await eventually(
      async () => {
        const r = await service.api('POST', '/auth/intent', intent);
        return r.body?.detail?.includes('No mail gateway') ? null : r;
      },
      { what: 'a connected gateway', timeoutMs: 60_000, intervalMs: 500 },
    );
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    account = res.body;

    const folders: any[] = (await service.api('GET', `/folders?account_id=${account.id}`)).body.data;
    for (const f of folders) folderIds.set(f.provider_id, f.id);
    const roles = Object.fromEntries(folders.map((f) => [f.provider_id, f.role]));
    expect(roles).toEqual({
      INBOX: 'INBOX',
      '[Gmail]': 'UNKNOWN',
      [GMAIL_FOLDERS.all]: 'ALL',
      [GMAIL_FOLDERS.important]: 'IMPORTANT',
      [GMAIL_FOLDERS.starred]: 'STARRED',
      [GMAIL_FOLDERS.sent]: 'SENT',
      [GMAIL_FOLDERS.drafts]: 'DRAFTS',
      [GMAIL_FOLDERS.trash]: 'TRASH',
      [GMAIL_FOLDERS.spam]: 'SPAM',
      Work: 'UNKNOWN',
    });
    const work = folders.find((f) => f.provider_id === 'Work');
    expect(work).toMatchObject({ name: 'Work', parent_id: null });
    expect(folders.find((f) => f.provider_id === GMAIL_FOLDERS.all)).toMatchObject({
      name: 'All Mail',
      parent_id: folderIds.get('[Gmail]'),
    });
  });

  it('makes one email of a message with two labels, identified by X-GM-MSGID', async () => {
    const { raw, messageId } = rfc822('labelled twice');
    const delivered = gmail.deliver({ raw, labels: ['\\Inbox', 'Work'] });
    expect(Object.keys(delivered.uids).sort()).toEqual([GMAIL_FOLDERS.all, 'INBOX', 'Work'].sort());

    const email = await eventually(
      async () => {
        const found = await byMessageId(messageId);
        return found.length === 1 && found[0].folder_ids.length === 3 ? found[0] : null;
      },
      { what: 'the email in INBOX, Work and All Mail' },
    );
    expect([...email.folder_ids].sort()).toEqual(
      [folderIds.get('INBOX'), folderIds.get('Work'), folderIds.get(GMAIL_FOLDERS.all)].sort(),
    );
    expect(email).toMatchObject({ provider_id: delivered.msgid, role: 'INBOX', unread: true });
    // Still one email, one email.new: the other copies only added folders.
    expect(await byMessageId(messageId)).toHaveLength(1);
    const events = service.mailQuery<{ n: number }>(
      account.id,
      "SELECT COUNT(*) AS n FROM events WHERE account_id = ? AND type = 'email.new' AND json_extract(data_json, '$.id') = ?",
      account.id,
      email.id,
    )[0]!;
    expect(events.n).toBe(1);
    expect((await emailsWith(`folder=${folderIds.get('Work')}`)).map((e) => e.id)).toEqual([email.id]);
  });

  it('takes the role and the starred flag from system labels', async () => {
    const { raw, messageId } = rfc822('important and starred');
    const delivered = gmail.deliver({ raw, labels: ['\\Important', '\\Starred'] });
    const email = await eventually(
      async () => {
        const [found] = await byMessageId(messageId);
        return found?.folder_ids.length === 3 ? found : null;
      },
      { what: 'the starred email in three folders' },
    );
    expect([...email.folder_ids].sort()).toEqual(
      [
        folderIds.get(GMAIL_FOLDERS.important),
        folderIds.get(GMAIL_FOLDERS.starred),
        folderIds.get(GMAIL_FOLDERS.all),
      ].sort(),
    );
    expect(email).toMatchObject({ provider_id: delivered.msgid, role: 'IMPORTANT', starred: true });
  });

  it('threads by X-GM-THRID, not by headers or subject', async () => {
    const first = rfc822('lunch on friday?');
    const firstIds = gmail.deliver({ raw: first.raw });
    // Same Gmail conversation, but no In-Reply-To/References and another subject.
    const second = rfc822('different words entirely');
    gmail.deliver({ raw: second.raw, threadOf: firstIds });
    // Same subject (and a reply prefix), but Gmail put it in a conversation of its own.
    const third = rfc822('Re: lunch on friday?');
    gmail.deliver({ raw: third.raw });

    const [a, b, c] = await eventually(
      async () => {
        const found = await Promise.all([first, second, third].map(async (m) => (await byMessageId(m.messageId))[0]));
        return found.every(Boolean) ? found : null;
      },
      { what: 'three emails' },
    );
    expect(b.thread_id).toBe(a.thread_id);
    expect(c.thread_id).not.toBe(a.thread_id);
    const thread = (await service.api('GET', `/${account.id}/emails/${a.id}/thread`)).body;
    expect(thread.data.map((e: any) => e.id).sort()).toEqual([a.id, b.id].sort());
  });
});
