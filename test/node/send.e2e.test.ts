// End to end: sending, drafts, mailbox actions and tracking against a real Dovecot and Postfix,
// `npm start` (workerd) and the real gateway. Mailboxes are checked with separate IMAP clients.
import type { ImapFlow } from 'imapflow';
import type { Schemas } from '../../client/index.ts';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { uidsWithSubject, flagsOf, openImap } from '../mailserver/client.ts';
import type { MailServer } from '../mailserver/mailserver.ts';
import { connectMailbox } from './connect.ts';
import { feedEvents } from './event-feed.ts';
import {
  dumpLogsOnFailure,
  eventually,
  startEndToEnd,
  stopEndToEnd,
  type GatewayProcess,
  type Service,
} from './service.ts';

let mail: MailServer;
let service: Service;
let gateway: GatewayProcess;
let alice: { id: string; email: string };
let bobImap: ImapFlow;
let aliceImap: ImapFlow;

const user = (name: string) => mail.users.find((u) => u.user === name)!;
const pdf = Buffer.from('%PDF-1.4\n% attachment bytes \x00\x01\x02\xff\n' + 'z'.repeat(3000), 'latin1');

async function post(path: string, body: string | FormData, headers: Record<string, string> = {}) {
  const res = await service.fetch(`${service.base}/api/v1${path}`, {
    method: 'POST',
    headers: { 'X-API-KEY': service.adminKey, ...headers },
    body,
  });
  const text = await res.text();
  let parsed: any = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: res.status, body: parsed };
}
/** POST /emails through the typed client. */
async function sendJson(body: Schemas['SendEmailRequest'], headers: Record<string, string> = {}) {
  const { data, error, response } = await service.client.POST('/api/v1/emails', { body, headers });
  return { status: response.status, body: (data ?? error) as any };
}

/** Waits until exactly one message with this subject is in the folder; its UID. */
async function arrived(client: ImapFlow, folder: string, subject: string): Promise<number[]> {
  return eventually(
    async () => {
      const uids = await uidsWithSubject(client, folder, subject);
      return uids.length === 1 ? uids : null;
    },
    { what: `"${subject}" in ${folder}` },
  );
}

async function source(client: ImapFlow, folder: string, uid: number): Promise<string> {
  const lock = await client.getMailboxLock(folder);
  try {
    const msg = await client.fetchOne(String(uid), { source: true }, { uid: true });
    return msg ? msg.source!.toString('latin1') : '';
  } finally {
    lock.release();
  }
}

const header = (raw: string, name: string) =>
  new RegExp(`^${name}:[ \\t]*(.*(?:\\r?\\n[ \\t].*)*)`, 'im')
    .exec(raw)?.[1]
    ?.replace(/\r?\n[ \t]+/g, ' ')
    .trim();
/** alice's events of this type, their data as subscribers get it. */
const events = async (type: string) => (await feedEvents(service, alice.id, [type])).map((e) => e.data);
type EmailFilters = { role?: Schemas['Role']; folder?: string };
/** The first email of alice's with this subject (GET /emails through the typed client), once it synced. */
const emailBySubject = (subject: string, filters: EmailFilters = {}) =>
  eventually(
    async () => {
      const { data } = await service.client.GET('/api/v1/emails', {
        params: { query: { account_id: alice.id, subject, ...filters } },
      });
      return data?.data[0];
    },
    { what: `email "${subject}" in the API`, timeoutMs: 30_000, intervalMs: 200 },
  );

beforeAll(async () => {
  ({ mail, service, gateway } = await startEndToEnd('gw-send'));
  alice = await connectMailbox(service, mail.info(), 'alice', { display_name: 'Alice Example' });
  bobImap = await openImap(mail.info(), 'bob');
  aliceImap = await openImap(mail.info(), 'alice');
}, 180_000);

afterEach((ctx) => dumpLogsOnFailure(ctx, service));

afterAll(async () => {
  await bobImap?.logout().catch(() => undefined);
  await aliceImap?.logout().catch(() => undefined);
  await stopEndToEnd({ mail, service });
});

describe('sending', () => {
  it('sends JSON with an attachment: bob receives it, alice has the Sent copy, email.new says origin api', async () => {
    const res = await sendJson({
      account_id: alice.id,
      to: [{ identifier: user('bob').email, display_name: 'Bob B' }],
      cc: [{ identifier: user('carol').email }],
      subject: 'json send 1',
      body: '<p>Hello <b>Bob</b></p>',
      custom_headers: [
        { name: 'X-Campaign', value: 'c-42' },
        { name: 'List-Unsubscribe', value: '<mailto:unsub@example.test>' },
      ],
      attachments: [{ name: 'report.pdf', content_type: 'application/pdf', content: pdf.toString('base64') }],
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ object: 'EmailSent', account_id: alice.id, provider_id: null, tracking_id: null });
    expect(res.body.message_id).toMatch(/^<.+@example\.test>$/);

    const [uid] = await arrived(bobImap, 'INBOX', 'json send 1');
    const raw = await source(bobImap, 'INBOX', uid!);
    expect(header(raw, 'Message-ID')).toBe(res.body.message_id);
    expect(header(raw, 'From')).toBe(`Alice Example <${user('alice').email}>`);
    expect(header(raw, 'To')).toBe(`Bob B <${user('bob').email}>`);
    expect(header(raw, 'X-Campaign')).toBe('c-42');
    expect(header(raw, 'List-Unsubscribe')).toBe('<mailto:unsub@example.test>');
    expect(raw).toMatch(/Content-Type: text\/plain/i);
    expect(raw).toMatch(/Content-Type: text\/html/i);
    const b64 = /filename="?report\.pdf"?[\s\S]*?\r?\n\r?\n([A-Za-z0-9+/=\r\n]+)/.exec(raw)![1]!;
    expect(Buffer.from(b64.replace(/\s+/g, ''), 'base64').equals(pdf)).toBe(true);
    expect(await uidsWithSubject(await openImap(mail.info(), 'carol'), 'INBOX', 'json send 1')).toHaveLength(1);

    // The Sent copy holds the same bytes; its sync says origin api.
    const [sentUid] = await arrived(aliceImap, 'Sent', 'json send 1');
    expect(header(await source(aliceImap, 'Sent', sentUid!), 'Message-ID')).toBe(res.body.message_id);
    const synced = await emailBySubject('json send 1');
    expect(synced).toMatchObject({
      origin: 'api',
      role: 'SENT',
      message_id: res.body.message_id,
      has_attachments: true,
      unread: false,
    });
    expect(synced.body_plain).toContain('Hello Bob');
    // IMAP gives no provider id: null, never "" (docs/api.md).
    expect(synced.provider_id).toBeNull();
    const news = (await events('email.new')).filter((e) => e.message_id === res.body.message_id);
    expect(news).toHaveLength(1);
    expect(news[0].origin).toBe('api');
  });

  it('sends multipart/form-data with a file', async () => {
    const form = new FormData();
    form.set('account_id', alice.id);
    form.set('to', JSON.stringify([{ identifier: user('bob').email }]));
    form.set('subject', 'multipart send 1');
    form.set('body', '<p>form body</p>');
    form.set('body_plain', 'the plain form body');
    form.append('attachments', new File([pdf], 'form.pdf', { type: 'application/pdf' }));
    const res = await post('/emails', form);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const [uid] = await arrived(bobImap, 'INBOX', 'multipart send 1');
    const raw = await source(bobImap, 'INBOX', uid!);
    expect(raw).toContain('the plain form body');
    const b64 = /filename="?form\.pdf"?[\s\S]*?\r?\n\r?\n([A-Za-z0-9+/=\r\n]+)/.exec(raw)![1]!;
    expect(Buffer.from(b64.replace(/\s+/g, ''), 'base64').equals(pdf)).toBe(true);
    expect((await emailBySubject('multipart send 1')).message_id).toBe(res.body.message_id);
  });

  it('answers by reply_to: recipients, Re: subject, threading headers, same thread', async () => {
    await mail.deliver({
      from: `Bob B <${user('bob').email}>`,
      to: user('alice').email,
      subject: 'lunch?',
      text: 'shall we?',
      messageId: '<lunch-1@example.test>',
    });
    const original = await emailBySubject('lunch?', { role: 'INBOX' });
    const res = await sendJson({ account_id: alice.id, reply_to: original.id, body: '<p>yes!</p>' });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const [uid] = await arrived(bobImap, 'INBOX', 'Re: lunch?');
    const raw = await source(bobImap, 'INBOX', uid!);
    expect(header(raw, 'Subject')).toBe('Re: lunch?');
    expect(header(raw, 'To')).toContain(user('bob').email);
    expect(header(raw, 'In-Reply-To')).toBe('<lunch-1@example.test>');
    expect(header(raw, 'References')).toBe('<lunch-1@example.test>');
    const reply = await emailBySubject('Re: lunch?');
    expect(reply.thread_id).toBe(original.thread_id);
    expect(reply.in_reply_to).toEqual({ message_id: '<lunch-1@example.test>', id: original.id });
  });

  it('sends once per Idempotency-Key, also when the requests race', async () => {
    const body = {
      account_id: alice.id,
      to: [{ identifier: user('bob').email }],
      subject: 'idem 1',
      body: '<p>once</p>',
    };
    const first = await sendJson(body, { 'Idempotency-Key': 'key-idem-1' });
    const again = await sendJson(body, { 'Idempotency-Key': 'key-idem-1' });
    expect(first.status).toBe(200);
    expect(again).toEqual(first);

    const raced = await Promise.all(
      [1, 2, 3].map(() => sendJson({ ...body, subject: 'idem 2' }, { 'Idempotency-Key': 'key-idem-2' })),
    );
    const ok = raced.filter((r) => r.status === 200);
    expect(ok.length).toBeGreaterThanOrEqual(1);
    for (const r of raced)
      if (r.status !== 200) expect(r.body).toMatchObject({ status: 409, type: 'errors/already_exists' });
    expect(new Set(ok.map((r) => r.body.message_id)).size).toBe(1);

    await emailBySubject('idem 1');
    await emailBySubject('idem 2');
    expect(await uidsWithSubject(bobImap, 'INBOX', 'idem 1')).toHaveLength(1);
    expect(await uidsWithSubject(bobImap, 'INBOX', 'idem 2')).toHaveLength(1);
  });

  it('refuses bad requests with the right error and sends nothing', async () => {
    const ok = { account_id: alice.id, to: [{ identifier: user('bob').email }], body: '<p>no</p>' };
    const cases: [Schemas['SendEmailRequest'], number][] = [
      [{ ...ok, subject: 'refused 1', custom_headers: [{ name: 'Received', value: 'from x' }] }, 400],
      [
        { ...ok, subject: 'refused 2', custom_headers: [{ name: 'X-Note', value: 'a\r\nBcc: carol@example.test' }] },
        400,
      ],
      [{ ...ok, subject: 'refused 3', to: [] }, 400],
    ];
    for (const [body, status] of cases) {
      const res = await sendJson(body);
      expect(res.status, JSON.stringify(res.body)).toBe(status);
      expect(res.body.type).toBe('errors/invalid_parameters');
    }
    const huge = await sendJson({
      ...ok,
      subject: 'refused 4',
      attachments: [{ name: 'big.bin', content: 'A'.repeat(31 * 1024 * 1024) }],
    });
    expect(huge.status).toBe(413);
    expect(huge.body.type).toBe('errors/payload_too_large');
    // A later send arrives, the refused ones never did.
    await sendJson({ ...ok, subject: 'after refused' });
    await eventually(async () => (await uidsWithSubject(bobImap, 'INBOX', 'after refused')).length === 1, {
      what: 'the later message',
    });
    expect(await uidsWithSubject(bobImap, 'INBOX', 'refused ')).toHaveLength(0);
    expect(await uidsWithSubject(await openImap(mail.info(), 'carol'), 'INBOX', 'refused 2')).toHaveLength(0);
  });

  it('tracks opens and clicks, and refuses a modified link', async () => {
    const res = await sendJson({
      account_id: alice.id,
      to: [{ identifier: user('bob').email }],
      subject: 'tracked 1',
      body: '<html><body><p>see <a href="https://example.org/offer?id=7">the offer</a></p></body></html>',
      tracking_options: { opens: true, clicks: true, label: 'spring' },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.tracking_id).toMatch(/^trk_/);
    const [uid] = await arrived(bobImap, 'INBOX', 'tracked 1');
    const raw = await source(bobImap, 'INBOX', uid!);
    const html = Buffer.from(
      /Content-Type: text\/html[\s\S]*?\r?\n\r?\n([\s\S]*?)\r?\n--/i
        .exec(raw)![1]!
        .replace(/=\r?\n/g, '')
        .replace(/=([0-9A-F]{2})/g, (_, h) => String.fromCharCode(parseInt(h, 16))),
      'latin1',
    ).toString();
    const pixel = /<img src="([^"]+)"/.exec(html)![1]!.replace(/&amp;/g, '&');
    const link = /<a href="([^"]+)"/.exec(html)![1]!.replace(/&amp;/g, '&');
    expect(pixel.startsWith(`${service.base}/t/open/${res.body.tracking_id}`)).toBe(true);
    expect(link.startsWith(`${service.base}/t/click/${res.body.tracking_id}`)).toBe(true);

    const sent = await emailBySubject('tracked 1');
    expect(sent).toMatchObject({ origin: 'api', tracking_id: res.body.tracking_id });
    expect(
      (await service.fetch(pixel, { headers: { 'User-Agent': 'MailReader/1' } })).headers.get('content-type'),
    ).toBe('image/gif');
    const click = await service.fetch(link, { redirect: 'manual' });
    expect(click.status).toBe(302);
    expect(click.headers.get('location')).toBe('https://example.org/offer?id=7');
    const modified = new URL(link);
    modified.searchParams.set('u', 'https://evil.example/');
    const refused = await service.fetch(modified, { redirect: 'manual' });
    expect(refused.status).toBe(404);
    expect(((await refused.json()) as { type: string }).type).toBe('errors/not_found');

    expect(await events('tracking.open')).toEqual([
      {
        email_id: sent.id,
        tracking_id: res.body.tracking_id,
        user_agent: 'MailReader/1',
        ip: expect.any(String),
        label: 'spring',
      },
    ]);
    expect(await events('tracking.click')).toEqual([
      {
        email_id: sent.id,
        tracking_id: res.body.tracking_id,
        url: 'https://example.org/offer?id=7',
        user_agent: expect.any(String),
        ip: expect.any(String),
        label: 'spring',
      },
    ]);
  });

  it('saves a draft in Drafts; it syncs with the same draft_id', async () => {
    const res = await post(
      '/drafts',
      JSON.stringify({
        account_id: alice.id,
        subject: 'draft 1',
        body: '<p>later</p>',
        bcc: [{ identifier: user('carol').email }],
      }),
      { 'Content-Type': 'application/json' },
    );
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ object: 'DraftCreated', account_id: alice.id, tracking_id: null });
    expect(res.body.draft_id).toMatch(/^drf_/);
    const [uid] = await arrived(aliceImap, 'Drafts', 'draft 1');
    expect((await flagsOf(aliceImap, 'Drafts', uid!)).has('\\Draft')).toBe(true);
    const draft = await eventually(
      async () => (await events('email.draft.new')).find((e) => e.message_id === res.body.message_id),
      { what: 'email.draft.new' },
    );
    expect(draft).toMatchObject({ object: 'Draft', draft_id: res.body.draft_id, origin: 'api' });
  });
});

describe('sending a saved draft (draft_id)', () => {
  it("sends the draft's recipients, body and attachment with the request's subject, then removes it: email.draft.delete", async () => {
    const saved = await service.client.POST('/api/v1/drafts', {
      body: {
        account_id: alice.id,
        to: [{ identifier: user('bob').email, display_name: 'Bob B' }],
        subject: 'draft to send',
        body: '<p>the body written in the draft</p>',
        attachments: [{ name: 'plan.pdf', content_type: 'application/pdf', content: pdf.toString('base64') }],
      },
    });
    expect(saved.response.status, JSON.stringify(saved.error)).toBe(200);
    const draftId = saved.data!.draft_id;
    const [draftUid] = await arrived(aliceImap, 'Drafts', 'draft to send');
    const draft = await eventually(
      async () => {
        const { data } = await service.client.GET('/api/v1/drafts', { params: { query: { account_id: alice.id } } });
        return data?.data.find((d) => d.draft_id === draftId);
      },
      { what: 'the draft in GET /drafts' },
    );
    expect(draft).toMatchObject({ object: 'Draft', has_attachments: true, provider_id: null });

    // Unknown fields are refused by name, and an unknown draft is a 404: nothing is sent.
    const typo = await service.client.POST('/api/v1/emails', {
      body: { account_id: alice.id, draft_id: draftId, tracking_options: { links: true } as never },
    });
    expect(typo.response.status).toBe(400);
    expect(typo.error?.detail).toContain('links');
    const unknown = await service.client.POST('/api/v1/emails', {
      body: { account_id: alice.id, draft_id: 'drf_01JD8Z6Q3W4E5R6T7Y8V9K0P1A' },
    });
    expect(unknown.response.status).toBe(404);

    const sent = await service.client.POST('/api/v1/emails', {
      body: { account_id: alice.id, draft_id: draftId, subject: 'draft sent at last' },
    });
    expect(sent.response.status, JSON.stringify(sent.error)).toBe(200);
    const [uid] = await arrived(bobImap, 'INBOX', 'draft sent at last');
    const raw = await source(bobImap, 'INBOX', uid!);
    expect(header(raw, 'Message-ID')).toBe(sent.data!.message_id);
    expect(header(raw, 'To')).toBe(`Bob B <${user('bob').email}>`);
    expect(raw).toContain('the body written in the draft');
    const b64 = /filename="?plan\.pdf"?[\s\S]*?\r?\n\r?\n([A-Za-z0-9+/=\r\n]+)/.exec(raw)![1]!;
    expect(Buffer.from(b64.replace(/\s+/g, ''), 'base64').equals(pdf)).toBe(true);

    // The draft left Drafts, and its email went with email.draft.delete.
    await eventually(async () => (await uidsWithSubject(aliceImap, 'Drafts', 'draft to send')).length === 0, {
      what: 'the draft to leave Drafts',
    });
    expect(await uidsWithSubject(aliceImap, 'Drafts', 'draft to send')).not.toContain(draftUid);
    const gone = await eventually(
      async () => (await events('email.draft.delete')).find((e) => e.draft_id === draftId),
      {
        what: 'email.draft.delete',
        timeoutMs: 60_000,
      },
    );
    expect(gone.id).toBe(draft.id);
    const { data: drafts } = await service.client.GET('/api/v1/drafts', {
      params: { query: { account_id: alice.id } },
    });
    expect(drafts!.data.map((d) => d.draft_id)).not.toContain(draftId);
    expect((await emailBySubject('draft sent at last', { role: 'SENT' })).origin).toBe('api');
  });
});

describe('mailbox actions', () => {
  it('unread, read, star, move and trash change the real mailbox and keep the id; emptying Trash deletes', async () => {
    await mail.deliver({ from: 'news@remote.test', to: user('alice').email, subject: 'act on me', text: 'act' });
    const email = await emailBySubject('act on me', { role: 'INBOX' });
    const [inboxUid] = await uidsWithSubject(aliceImap, 'INBOX', 'act on me');
    const folders = (await service.api('GET', `/folders?account_id=${alice.id}`)).body.data;
    const archive = folders.find((f: any) => f.role === 'ARCHIVE');
    const trash = folders.find((f: any) => f.role === 'TRASH');

    const read = await service.api('POST', `/${alice.id}/emails/${email.id}/read`);
    expect(read.status, JSON.stringify(read.body)).toBe(200);
    expect(read.body).toMatchObject({ object: 'Email', id: email.id, is_unread: false });
    expect((await flagsOf(aliceImap, 'INBOX', inboxUid!)).has('\\Seen')).toBe(true);

    const unread = await service.api('POST', `/${alice.id}/emails/${email.id}/unread`);
    expect(unread.body).toMatchObject({ id: email.id, is_unread: true });
    expect((await flagsOf(aliceImap, 'INBOX', inboxUid!)).has('\\Seen')).toBe(false);

    const starred = await service.api('PUT', `/emails/${email.id}`, { starred: true });
    expect(starred.status, JSON.stringify(starred.body)).toBe(200);
    expect((await flagsOf(aliceImap, 'INBOX', inboxUid!)).has('\\Flagged')).toBe(true);

    const moved = await service.api('PUT', `/emails/${email.id}`, { folders: [archive.id] });
    expect(moved.status, JSON.stringify(moved.body)).toBe(200);
    expect(moved.body).toMatchObject({ id: email.id, folders: [archive.id] });
    expect(await uidsWithSubject(aliceImap, 'INBOX', 'act on me')).toHaveLength(0);
    const [archiveUid] = await uidsWithSubject(aliceImap, 'Archive', 'act on me');
    expect(archiveUid).toBeTruthy();
    expect((await flagsOf(aliceImap, 'Archive', archiveUid!)).has('\\Flagged')).toBe(true);
    expect(
      service.mailQuery<{ uid: number }>(alice.id, 'SELECT uid FROM email_folders WHERE email_id = ?', email.id),
    ).toEqual([{ uid: archiveUid }]);

    const deleted = await service.api('DELETE', `/emails/${email.id}`);
    expect(deleted.body).toEqual({ object: 'EmailDeleted', id: email.id });
    expect(await uidsWithSubject(aliceImap, 'Archive', 'act on me')).toHaveLength(0);
    expect(await uidsWithSubject(aliceImap, 'Trash', 'act on me')).toHaveLength(1);
    const inTrash = (await service.api('GET', `/emails/${email.id}`)).body;
    expect(inTrash).toMatchObject({ id: email.id, folders: [trash.id], is_unread: true });
    expect(
      (await service.api('GET', `/emails?account_id=${alice.id}&role=TRASH`)).body.data.map((e: any) => e.id),
    ).toContain(email.id);

    // One email.update per action, none added by the sync seeing the same changes.
    await new Promise((r) => setTimeout(r, 2500));
    const updates = (await events('email.update')).filter((e) => e.id === email.id);
    expect(updates.map((u) => [u.unread, u.starred, u.role])).toEqual([
      [false, false, 'INBOX'],
      [true, false, 'INBOX'],
      [true, true, 'INBOX'],
      [true, true, 'ARCHIVE'],
      [true, true, 'TRASH'],
    ]);

    // Another client empties the Trash: email.delete.
    const lock = await aliceImap.getMailboxLock('Trash');
    try {
      await aliceImap.messageDelete('1:*');
    } finally {
      lock.release();
    }
    await eventually(async () => (await service.api('GET', `/emails/${email.id}`)).status === 404, {
      what: 'the email to go',
    });
    expect((await events('email.delete')).map((e) => e.id)).toContain(email.id);
  });

  it('folders take a provider path and role names in any case, like the folder filter', async () => {
    await mail.deliver({ from: 'ads@remote.test', to: user('alice').email, subject: 'to the junk', text: 'buy' });
    const email = await emailBySubject('to the junk', { role: 'INBOX' });
    const folders = (await service.client.GET('/api/v1/folders', { params: { query: { account_id: alice.id } } })).data!
      .data;
    const junk = folders.find((f) => f.provider_id === 'Junk')!;
    const moved = await service.client.PUT('/api/v1/emails/{email_id}', {
      params: { path: { email_id: email.id } },
      body: { folders: ['Junk'] },
    });
    expect(moved.response.status, JSON.stringify(moved.error)).toBe(200);
    expect(moved.data!.folders).toEqual([junk.id]);
    expect(await uidsWithSubject(aliceImap, 'Junk', 'to the junk')).toHaveLength(1);
    const back = await service.client.PUT('/api/v1/emails/{email_id}', {
      params: { path: { email_id: email.id } },
      body: { folders: ['inbox'] },
    });
    expect(back.response.status, JSON.stringify(back.error)).toBe(200);
    expect(await uidsWithSubject(aliceImap, 'INBOX', 'to the junk')).toHaveLength(1);
    const missing = await service.client.PUT('/api/v1/emails/{email_id}', {
      params: { path: { email_id: email.id } },
      body: { folders: ['No Such Folder'] },
    });
    expect(missing.response.status).toBe(404);
    // The role filter takes any case too.
    const { data } = await service.client.GET('/api/v1/emails', {
      params: { query: { account_id: alice.id, role: 'inbox' as 'INBOX' } },
    });
    expect(data!.data.map((e) => e.id)).toContain(email.id);
  });

  it('answers 502 within the bound when the gateway is down, changing nothing', { timeout: 60_000 }, async () => {
    await mail.deliver({ from: 'news@remote.test', to: user('alice').email, subject: 'while down', text: 'x' });
    const email = await emailBySubject('while down', { role: 'INBOX' });
    await gateway.kill('SIGKILL');
    const started = Date.now();
    const res = await service.api('POST', `/${alice.id}/emails/${email.id}/read`);
    expect(Date.now() - started).toBeLessThan(21_000);
    expect(res.status).toBe(502);
    expect(res.body.type).toBe('errors/provider_error');
    const [uid] = await uidsWithSubject(aliceImap, 'INBOX', 'while down');
    expect((await flagsOf(aliceImap, 'INBOX', uid!)).has('\\Seen')).toBe(false);
    expect((await service.api('GET', `/emails/${email.id}`)).body.is_unread).toBe(true);
  });
});
