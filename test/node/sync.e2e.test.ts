// End to end: a real Dovecot and Postfix, `npm start` (workerd), the real gateway, real HTTP.
import { readFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openImap } from '../mailserver/client.ts';
import type { MailServer } from '../mailserver/mailserver.ts';
import { mailboxIntent } from './connect.ts';
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
let alice: { id: string };

const user = (name: string) => mail.users.find((u) => u.user === name)!;

const intent = (name: string, overrides: Record<string, unknown> = {}) => mailboxIntent(mail.info(), name, overrides);

const listAll = (accountId: string) => service.listEmails(accountId);

beforeAll(async () => {
  ({ mail, service, gateway } = await startEndToEnd('gw-main'));
});

afterEach((ctx) => dumpLogsOnFailure(ctx, service));

afterAll(() => stopEndToEnd({ mail, service }));

describe('connecting a mailbox', () => {
  it('refuses a wrong password with 401 and leaves no account', async () => {
    const res = await eventually(
      async () => {
        const r = await service.api('POST', '/auth/intent', intent('bob', { password: 'wrong' }));
        return r.body?.detail?.includes('No mail gateway') ? null : r;
      },
      { what: 'a connected gateway', timeoutMs: 60_000, intervalMs: 500 },
    );
    expect(res.status).toBe(401);
    expect(res.body.type).toBe('errors/invalid_credentials');
    expect((await service.api('GET', '/accounts')).body.data).toEqual([]);
  });

  it('answers 502 for an unreachable server, again leaving no account', async () => {
    const res = await service.api('POST', '/auth/intent', intent('bob', { imap_port: 1 }));
    expect(res.status).toBe(502);
    expect(res.body.type).toBe('errors/provider_error');
    expect((await service.api('GET', '/accounts')).body.data).toEqual([]);
  });

  it('connects alice, ignoring mail that was already there', async () => {
    await mail.deliver({ from: 'old@remote.test', to: user('alice').email, subject: 'from before', text: 'old' });
    const res = await service.api('POST', '/auth/intent', intent('alice', { state: 's-1', metadata: { team: 'a' } }));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({
      object: 'Account',
      provider: 'imap',
      email: user('alice').email,
      status: 'running',
      state: 's-1',
      metadata: { team: 'a' },
    });
    alice = res.body;
    const again = await service.api('POST', '/auth/intent', intent('alice'));
    expect(again.status).toBe(409);
    expect(again.body.detail).toContain(alice.id);

    const folders = (await service.api('GET', `/folders?account_id=${alice.id}`)).body.data;
    for (const role of ['INBOX', 'SENT', 'DRAFTS', 'TRASH', 'SPAM', 'ARCHIVE'])
      expect(folders.map((f: any) => f.role)).toContain(role);

    const row = service.query<{ credentials: string }>('SELECT * FROM accounts WHERE id = ?', alice.id)[0]!;
    const dump = JSON.stringify(row);
    expect(dump).not.toContain(user('alice').password);
    expect(row.credentials).toMatch(/^v2\.[0-9a-f]{8}\./); // sealed under a named key
    expect((await service.api('GET', '/accounts')).body.data).toHaveLength(1);
  });

  it('syncs 20 new messages with their parts, and not the old one', async () => {
    const to = user('alice').email;
    const png = readFileSync(new URL('../fixtures/pixel.png', import.meta.url));
    const pdf = Buffer.from('%PDF-1.4\n% a tiny pdf for tests\n' + 'x'.repeat(5000));
    const sends: Promise<unknown>[] = [];
    for (let i = 1; i <= 17; i++) {
      sends.push(
        mail.deliver({
          from: `Sender ${i} <sender${i}@remote.test>`,
          to: [to, user('carol').email],
          subject: `message ${i}`,
          text: `plain body ${i}`,
          html: `<p>html body <b>${i}</b></p>`,
          attachments:
            i % 4 === 0 ? [{ filename: `report-${i}.pdf`, content: pdf, contentType: 'application/pdf' }] : undefined,
        }),
      );
    }
    sends.push(
      mail.deliver({
        from: 'Inline <inline@remote.test>',
        to,
        subject: 'inline image',
        html: '<p>look: <img src="cid:pixel@test"></p>',
        attachments: [{ filename: 'pixel.png', content: png, contentType: 'image/png', cid: 'pixel@test' }],
      }),
      mail.deliver({
        from: 'Html Only <html@remote.test>',
        to,
        subject: 'html only',
        html: '<h1>Only HTML</h1><p>no text part</p>',
      }),
      mail.deliver({
        from: 'latin@remote.test',
        to,
        raw: Buffer.concat([
          Buffer.from(
            [
              'From: =?iso-8859-1?q?J=F6rg_M=FCller?= <latin@remote.test>',
              `To: ${to}`,
              'Subject: =?iso-8859-1?q?Gr=FC=DFe?=',
              'Message-ID: <latin-1@remote.test>',
              'MIME-Version: 1.0',
              'Content-Type: text/plain; charset=iso-8859-1',
              'Content-Transfer-Encoding: 8bit',
              '',
              '',
            ].join('\r\n'),
          ),
          Buffer.from('Sch\xf6ne Gr\xfc\xdfe aus K\xf6ln\r\n', 'latin1'),
        ]),
      }),
    );
    await Promise.all(sends);

    const emails = await eventually(
      async () => {
        const all = await listAll(alice.id);
        return all.length >= 20 ? all : null;
      },
      { what: '20 emails', timeoutMs: 60_000, intervalMs: 250 },
    );
    expect(emails).toHaveLength(20);
    expect(emails.some((e) => e.subject === 'from before')).toBe(false);

    const inboxId = (await service.api('GET', `/folders?account_id=${alice.id}`)).body.data.find(
      (f: any) => f.role === 'INBOX',
    ).id;
    const five = emails.find((e) => e.subject === 'message 5');
    expect(five).toMatchObject({
      role: 'INBOX',
      unread: true,
      folder_ids: [inboxId],
      from_attendee: { identifier: 'sender5@remote.test', display_name: 'Sender 5' },
    });
    expect(five.to_attendees.map((a: any) => a.identifier).sort()).toEqual(
      [user('alice').email, user('carol').email].sort(),
    );
    expect(five.body).toContain('<b>5</b>');
    expect(five.body_plain).toContain('plain body 5');

    const withPdf = emails.find((e) => e.subject === 'message 8');
    expect(withPdf.attachments).toHaveLength(1);
    expect(withPdf.attachments[0]).toMatchObject({
      name: 'report-8.pdf',
      extension: 'pdf',
      mime: 'application/pdf',
      size: pdf.length,
    });
    const download = await service.fetch(
      `${service.base}/api/v1/emails/${withPdf.id}/attachments/${withPdf.attachments[0].id}`,
      { headers: { 'X-API-KEY': service.adminKey } },
    );
    expect(Buffer.from(await download.arrayBuffer()).equals(pdf)).toBe(true);

    const inline = emails.find((e) => e.subject === 'inline image');
    expect(inline.has_attachments).toBe(true);
    expect(inline.attachments[0]).toMatchObject({
      name: 'pixel.png',
      cid: 'pixel@test',
      inline: true,
      size: png.length,
    });
    const pixel = await service.fetch(
      `${service.base}/api/v1/emails/${inline.id}/attachments/${inline.attachments[0].id}`,
      {
        headers: { 'X-API-KEY': service.adminKey },
      },
    );
    expect(Buffer.from(await pixel.arrayBuffer()).equals(png)).toBe(true);

    const htmlOnly = emails.find((e) => e.subject === 'html only');
    expect(htmlOnly.body).toContain('<h1>Only HTML</h1>');
    expect(htmlOnly.body_plain).toMatch(/Only HTML/);

    const latin = emails.find((e) => e.subject === 'Grüße');
    expect(latin).toBeTruthy();
    expect(latin.from_attendee.display_name).toBe('Jörg Müller');
    expect(latin.body_plain).toContain('Schöne Grüße aus Köln');

    const raw = await service.fetch(`${service.base}/api/v1/emails/${five.id}/raw`, {
      headers: { 'X-API-KEY': service.adminKey },
    });
    expect(raw.headers.get('content-type')).toBe('message/rfc822');
    expect(await raw.text()).toContain('Subject: message 5');

    const newEvents = service.mailQuery<{ n: number }>(
      alice.id,
      "SELECT COUNT(*) AS n FROM events WHERE account_id = ? AND type = 'email.new'",
      alice.id,
    )[0]!;
    expect(newEvents.n).toBe(20);
  });

  it('follows another client: move, flags, expunge', async () => {
    const imap = await openImap(mail.info(), 'alice');
    try {
      const before = await listAll(alice.id);
      const target = before.find((e) => e.subject === 'message 1');
      const other = before.find((e) => e.subject === 'message 2');
      await imap.mailboxOpen('INBOX');
      const [uid1] = (await imap.search({ header: { subject: 'message 1' } }, { uid: true })) as number[];
      await imap.messageFlagsAdd(String(uid1), ['\\Seen', '\\Flagged'], { uid: true });
      await eventually(
        async () => {
          const e = (await service.api('GET', `/emails/${target.id}`)).body;
          return e.is_unread === false && (await listAll(alice.id)).find((x) => x.id === target.id)?.starred === true;
        },
        { what: 'flags to follow' },
      );

      await imap.messageMove(String(uid1), 'Archive', { uid: true });
      const archive = (await service.api('GET', `/folders?account_id=${alice.id}`)).body.data.find(
        (f: any) => f.role === 'ARCHIVE',
      );
      const moved = await eventually(
        async () => {
          const e = (await listAll(alice.id)).find((x) => x.id === target.id);
          return e?.role === 'ARCHIVE' ? e : null;
        },
        { what: 'the move to Archive' },
      );
      expect(moved.folder_ids).toEqual([archive.id]);
      expect(moved).toMatchObject({ id: target.id, unread: false, starred: true });

      const [uid2] = (await imap.search({ header: { subject: 'message 2' } }, { uid: true })) as number[];
      await imap.messageDelete(String(uid2), { uid: true });
      await eventually(async () => (await service.api('GET', `/emails/${other.id}`)).status === 404, {
        what: 'the expunge',
      });
      const deleted = service.mailQuery<{ data_json: string }>(
        alice.id,
        "SELECT data_json FROM events WHERE account_id = ? AND type = 'email.delete'",
        alice.id,
      );
      expect(deleted.map((d) => JSON.parse(d.data_json).id)).toEqual([other.id]);
      expect(
        service.mailQuery(
          alice.id,
          "SELECT id FROM events WHERE account_id = ? AND type = 'email.update' AND data_json LIKE ?",
          alice.id,
          `%${target.id}%`,
        ).length,
      ).toBeGreaterThanOrEqual(2);
      expect((await listAll(alice.id)).length).toBe(19);
    } finally {
      await imap.logout();
    }
  });

  it('loses nothing and duplicates nothing when the gateway is killed mid-sync', { timeout: 600_000 }, async () => {
    const before = new Map((await listAll(alice.id)).map((e) => [e.id, e.subject]));
    const total = 2000;
    const to = user('alice').email;
    let sent = 0;
    const sender = (async () => {
      const batch = 25;
      for (let i = 0; i < total; i += batch) {
        await Promise.all(
          Array.from({ length: Math.min(batch, total - i) }, (_, k) =>
            mail.deliver({
              from: 'bulk@remote.test',
              to,
              subject: `bulk ${i + k}`,
              text: `bulk body ${i + k}`,
              wait: false,
            }),
          ),
        );
        sent = i + batch;
      }
    })();
    // Kill the gateway while mail is flowing and syncing, then start a new one.
    await eventually(async () => (await listAll(alice.id)).length > before.size + 200, {
      what: 'sync to be under way',
      timeoutMs: 120_000,
      intervalMs: 250,
    });
    await gateway.kill('SIGKILL');
    await new Promise((r) => setTimeout(r, 1000));
    gateway = service.startGateway('gw-main', { NODE_EXTRA_CA_CERTS: mail.caFile });
    await sender;
    expect(sent).toBeGreaterThanOrEqual(total);

    const all = await eventually(
      async () => {
        const list = await listAll(alice.id);
        return list.length >= before.size + total ? list : null;
      },
      { what: `${total} bulk emails`, timeoutMs: 240_000, intervalMs: 1000 },
    );
    const subjects = all.filter((e) => e.subject.startsWith('bulk ')).map((e) => e.subject);
    expect(subjects.length).toBe(total);
    expect(new Set(subjects).size).toBe(total);
    for (const [id, subject] of before) expect(all.find((e) => e.id === id)?.subject).toBe(subject);
    const news = await feedEvents(service, alice.id, ['email.new']);
    expect(news.filter((e) => e.data.subject.startsWith('bulk ')).length).toBe(total);
  });

  it('turns disconnected when Dovecot stops and running again, with the mail meanwhile', {
    timeout: 300_000,
  }, async () => {
    await mail.stopDovecot();
    const down = await eventually(
      async () => {
        const a = (await service.api('GET', `/accounts/${alice.id}`)).body;
        return a.status === 'disconnected' ? a : null;
      },
      { what: 'status disconnected', timeoutMs: 60_000, intervalMs: 250 },
    );
    expect(down.last_error).toBeTruthy();
    const queued = mail.deliver({
      from: 'late@remote.test',
      to: user('alice').email,
      subject: 'while down',
      text: 'queued',
      wait: false,
    });
    await queued;
    await mail.startDovecot();
    await eventually(async () => (await service.api('GET', `/accounts/${alice.id}`)).body.status === 'running', {
      what: 'status running',
      timeoutMs: 90_000,
      intervalMs: 250,
    });
    await eventually(
      async () =>
        (await service.api('GET', `/emails?account_id=${alice.id}&subject=while%20down`)).body.data.length === 1,
      { what: 'the mail delivered while down', timeoutMs: 60_000, intervalMs: 250 },
    );
    // Events of the account's own row live in the directory (docs/capacity.md "Mail shards").
    const statuses = service
      .query<{ type: string }>(
        "SELECT type FROM events WHERE account_id = ? AND type LIKE 'account.status.%' ORDER BY created_at",
        alice.id,
      )
      .map((r) => r.type);
    expect(statuses).toEqual(['account.status.disconnected', 'account.status.running']);
  });

  it('removes the account and its data, leaving the mailbox alone', async () => {
    const stored = (table: string) =>
      service.queryEach(`SELECT id FROM ${table} WHERE account_id = ?`, alice.id).flatMap((d) => d.rows);
    expect(stored('emails').length).toBeGreaterThan(0);
    expect(stored('folders').length).toBeGreaterThan(0);
    const res = await service.api('DELETE', `/accounts/${alice.id}`);
    expect(res.body).toEqual({ object: 'AccountDeleted', id: alice.id });
    expect((await service.api('GET', `/emails?account_id=${alice.id}`)).body.data).toEqual([]);
    // The purge continues in the account object's alarms; the row goes last.
    await eventually(() => service.query('SELECT id FROM accounts WHERE id = ?', alice.id).length === 0, {
      what: 'the purge',
      timeoutMs: 60_000,
    });
    // Gone from every database, whichever shard held them.
    expect(stored('emails')).toEqual([]);
    expect(stored('folders')).toEqual([]);
    const imap = await openImap(mail.info(), 'alice');
    try {
      const status = await imap.status('INBOX', { messages: true });
      expect(status && status.messages).toBeGreaterThan(2000);
    } finally {
      await imap.logout();
    }
  });
});
