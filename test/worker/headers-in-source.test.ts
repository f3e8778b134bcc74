// An email's header block is stored once, in its raw source: the row's content keeps its length,
// and the headers are read from the source's start when an email is presented with them. Whatever
// the source, the API gives the very headers parsing the whole message gives. One request's R2 reads
// (header blocks, bodies over 256 KB) stay within the free plan's subrequests: pages hold fewer emails.
import { createExecutionContext, env, waitOnExecutionContext } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import { createApp } from '../../worker/app.ts';
import type { Env } from '../../worker/env.ts';
import { EMAIL_READS_MAX } from '../../worker/emails/source-headers.ts';
import { packContent, unpackContent } from '../../worker/emails/content.ts';
import { presentEmailSingle, type EmailRow, type StoredBlob } from '../../worker/emails/present.ts';
import { loadEmailRecords } from '../../worker/emails/store.ts';
import { parseMessage } from '../../worker/ingest/parse.ts';
import { ADMIN_KEY, api } from './helpers.ts';
import { LIMITS, meteredEnv, newMeter } from './metered.ts';
import { leased, list, messageIn, rawMessage } from './sync-helpers.ts';

/** Folded, encoded and repeated headers: what the raw source must give back exactly. */
function tangledMessage(subject: string): string {
  return [
    'Received: from mx.example.test (mx.example.test [192.0.2.1])',
    '\tby inbound.example.test with ESMTPS id 4f2a;',
    '\tThu, 26 Nov 2026 10:00:00 +0000',
    'Received: from sender.example.test by mx.example.test',
    'From: =?UTF-8?B?w4lsb2RpZQ==?= <elodie@example.test>',
    'To: Alice <alice@example.test>',
    `Subject: =?UTF-8?Q?${subject}_caf=C3=A9?=`,
    `Message-ID: <${crypto.randomUUID()}@example.test>`,
    'X-Long: one',
    '  two three',
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    '',
    'Body text',
    '',
  ].join('\r\n');
}

async function storedRow({ id: accountId, db }: { id: string; db: D1Database }, subjectLike: string) {
  const row = await db
    .prepare('SELECT * FROM emails WHERE account_id = ? AND subject LIKE ?')
    .bind(accountId, subjectLike)
    .first<EmailRow & { content: StoredBlob }>();
  return { row: row!, content: await unpackContent(row!.content) };
}

const app = createApp();

/** One API request through the app with a metered env: its subrequests stay within the free plan's. */
const metered = async (path: string) => {
  const meter = newMeter();
  const ctx = createExecutionContext();
  const response = await app.fetch(
    new Request(`https://mail.example.com/api/v1${path}`, { headers: { 'X-API-KEY': ADMIN_KEY } }),
    meteredEnv(env as Env, meter),
    ctx,
  );
  await waitOnExecutionContext(ctx);
  expect(meter.subrequests).toBeLessThanOrEqual(LIMITS.subrequests);
  return { status: response.status, body: (await response.json()) as any, subrequests: meter.subrequests };
};

const headersOf = async (raw: string) => (await parseMessage(new TextEncoder().encode(raw))).headers;

describe('the header block in the raw source', () => {
  it('is read back from the source as the very headers the message parses to, single, listed and threaded', async () => {
    const account = await leased();
    const tangled = tangledMessage('tangled');
    const attached = rawMessage({
      subject: 'attached',
      attachment: { name: 'a.txt', type: 'text/plain', content: 'eA==' },
    });
    await account.stub.applyChanges(account.gateway, [
      { type: 'messages', path: 'INBOX', uidvalidity: 1, messages: [messageIn(1, tangled), messageIn(2, attached)] },
    ]);

    const { row, content } = await storedRow(account, 'tangled%');
    expect(content.headers).toBeUndefined();
    expect(content.header_length).toBe(tangled.indexOf('\r\n\r\n') + 2);
    const expected = await headersOf(tangled);
    expect(expected.find((h) => h.name === 'X-Long')?.value).toBe('one  two three');

    const single = await api('GET', `/emails/${row.id}`);
    expect(single.body.headers).toEqual(expected);
    const scoped = await api('GET', `/${account.id}/emails/${row.id}`);
    expect(scoped.body.headers).toEqual(expected);
    const listed = await list(`account_id=${account.id}&include_headers=true`);
    const bySubject = new Map(listed.data.map((e: any) => [e.subject, e.headers]));
    expect(bySubject.get('tangled café')).toEqual(expected);
    expect(bySubject.get('attached')).toEqual(await headersOf(attached));
    const thread = await api('GET', `/${account.id}/emails/${row.id}/thread`);
    expect(thread.body.data[0].headers).toEqual(expected);
    // Without the option, a list reads no source and gives no headers.
    expect((await list(`account_id=${account.id}`)).data[0]).not.toHaveProperty('headers');
  });

  it("keeps the headers in the row when the source's start alone would parse otherwise", async () => {
    const account = await leased();
    // Bare CRs inside a header: the whole message has far more LF line ends, so it is read as it
    // is; its header block alone has more bare CRs than LFs and would be read as old Mac mail.
    const raw = ['Subject: odd\rone\rtwo\rthree', 'From: bob@example.test', '', ...Array(20).fill('line'), ''].join(
      '\n',
    );
    await account.stub.applyChanges(account.gateway, [
      { type: 'messages', path: 'INBOX', uidvalidity: 1, messages: [messageIn(1, raw)] },
    ]);
    const { row, content } = await storedRow(account, 'odd%');
    expect(content.header_length).toBeUndefined();
    const expected = await headersOf(raw);
    expect(content.headers).toEqual(expected);
    expect((await api('GET', `/emails/${row.id}`)).body.headers).toEqual(expected);

    // A source without a blank line is all header block: past 64 KB it is not read back from there.
    const endless = [
      'Subject: endless',
      'From: bob@example.test',
      ...Array(3000).fill('X-Filler: 0123456789abcdef'),
    ].join('\r\n');
    await account.stub.applyChanges(account.gateway, [
      { type: 'messages', path: 'INBOX', uidvalidity: 1, messages: [messageIn(2, endless)] },
    ]);
    const stored = await storedRow(account, 'endless');
    expect(stored.content.header_length).toBeUndefined();
    expect((await api('GET', `/emails/${stored.row.id}`)).body.headers).toEqual(await headersOf(endless));
  });

  it('reads rows whose content holds the headers, as stored before', async () => {
    const account = await leased();
    const raw = tangledMessage('before');
    await account.stub.applyChanges(account.gateway, [
      { type: 'messages', path: 'INBOX', uidvalidity: 1, messages: [messageIn(1, raw)] },
    ]);
    const { row, content } = await storedRow(account, 'before%');
    const asBefore = await packContent({ ...content, header_length: undefined, headers: await headersOf(raw) });
    await account.db.prepare('UPDATE emails SET content = ?, raw_key = NULL WHERE id = ?').bind(asBefore, row.id).run();
    expect((await api('GET', `/emails/${row.id}`)).body.headers).toEqual(await headersOf(raw));
  });

  it('refuses to present an email loaded without its headers, rather than give none', async () => {
    const account = await leased();
    await account.stub.applyChanges(account.gateway, [
      { type: 'messages', path: 'INBOX', uidvalidity: 1, messages: [messageIn(1, rawMessage({ subject: 'plain' }))] },
    ]);
    const { row } = await storedRow(account, 'plain');
    const [record] = await loadEmailRecords(env, [row]);
    expect(() => presentEmailSingle(record!)).toThrow(/without its headers/);
    const [withHeaders] = await loadEmailRecords(env, [row], { headers: true });
    expect(presentEmailSingle(withHeaders!).headers.find((h) => h.name === 'Subject')?.value).toBe('plain');
  });

  it('reads at most EMAIL_READS_MAX sources a request: pages and threads hold fewer emails, the rest follow', async () => {
    const account = await leased();
    const total = EMAIL_READS_MAX + 5;
    const root = `<root-${crypto.randomUUID()}@example.test>`;
    // One change per message, as mail arriving one by one comes: each source in its own segment.
    for (let uid = 1; uid <= total; uid++) {
      const raw = rawMessage({ subject: `one by one ${uid}`, ...(uid > 1 && { inReplyTo: root, references: root }) });
      const message = uid === 1 ? rawMessage({ subject: 'one by one 1', messageId: root }) : raw;
      await account.stub.applyChanges(account.gateway, [
        { type: 'messages', path: 'INBOX', uidvalidity: 1, messages: [messageIn(uid, message)] },
      ]);
    }

    const seen: string[] = [];
    let cursor = '';
    const pages: number[] = [];
    do {
      const page = await metered(`/emails?account_id=${account.id}&include_headers=true&limit=250${cursor}`);
      expect(page.status).toBe(200);
      for (const email of page.body.data) {
        expect(email.headers.find((h: { name: string }) => h.name === 'Subject')?.value).toBe(email.subject);
        seen.push(email.subject);
      }
      pages.push(page.body.data.length);
      cursor = page.body.cursor ? `&cursor=${encodeURIComponent(page.body.cursor)}` : '';
    } while (cursor);
    expect(pages).toEqual([EMAIL_READS_MAX, 5]);
    expect(new Set(seen).size).toBe(total);

    const first = (await list(`account_id=${account.id}&subject=${encodeURIComponent('one by one 1')}`)).data.find(
      (e: any) => e.subject === 'one by one 1',
    );
    const thread = await metered(`/${account.id}/emails/${first.id}/thread?limit=250`);
    expect(thread.body.data).toHaveLength(EMAIL_READS_MAX);
    expect(thread.body.has_more).toBe(true);

    // Sources synced together are one segment: their starts are one read, and a page holds them all.
    const batch = await leased('gw-2');
    const messages = Array.from({ length: total }, (_, i) =>
      messageIn(i + 1, rawMessage({ subject: `together ${i}` })),
    );
    await batch.stub.applyChanges(batch.gateway, [{ type: 'messages', path: 'INBOX', uidvalidity: 1, messages }]);
    const together = await metered(`/emails?account_id=${batch.id}&include_headers=true&limit=250`);
    expect(together.body.data).toHaveLength(total);
    expect(together.body.has_more).toBe(false);
    expect(together.subrequests).toBeLessThan(5);
  });

  it('counts large bodies read from R2 in the same reads: a page of them holds EMAIL_READS_MAX', async () => {
    const account = await leased();
    const total = EMAIL_READS_MAX + 5;
    // Bodies over 256 KB are kept in R2, one read each when the email is listed.
    const large = 'x'.repeat(270 * 1024);
    for (let first = 1; first <= total; first += 15) {
      const messages = Array.from({ length: Math.min(15, total - first + 1) }, (_, i) =>
        messageIn(first + i, rawMessage({ subject: `large ${first + i}`, text: large })),
      );
      await account.stub.applyChanges(account.gateway, [{ type: 'messages', path: 'INBOX', uidvalidity: 1, messages }]);
    }
    const pages: number[] = [];
    let cursor = '';
    do {
      const page = await metered(`/emails?account_id=${account.id}&limit=250${cursor}`);
      for (const email of page.body.data) expect(email.body_plain).toBe(large);
      pages.push(page.body.data.length);
      cursor = page.body.cursor ? `&cursor=${encodeURIComponent(page.body.cursor)}` : '';
    } while (cursor);
    expect(pages).toEqual([EMAIL_READS_MAX, 5]);

    // With headers too: each body and each start of a source counts, and no page reads past the budget.
    const withHeaders: string[] = [];
    cursor = '';
    do {
      const page = await metered(`/emails?account_id=${account.id}&include_headers=true&limit=250${cursor}`);
      expect(page.subrequests).toBeLessThanOrEqual(EMAIL_READS_MAX);
      for (const email of page.body.data) {
        expect(email.headers.find((h: { name: string }) => h.name === 'Subject')?.value).toBe(email.subject);
        withHeaders.push(email.subject);
      }
      cursor = page.body.cursor ? `&cursor=${encodeURIComponent(page.body.cursor)}` : '';
    } while (cursor);
    expect(new Set(withHeaders).size).toBe(total);
  });
});
