// How a new email is stored: bodies and addressing as one compressed BLOB, a text-only body
// once (its HTML made again on reading), the outbox row's data as the JSON it was made of,
// the outbox keeping a snapshot of the email rather than a copy, and the text body indexed.
import { describe, expect, it } from 'vitest';
import { packContent, unpackContent } from '../../worker/emails/content.ts';
import { CONTENT_DICTIONARIES } from '../../worker/emails/content-dictionary.ts';
import { textToHtml } from '../../worker/ingest/html.ts';
import { api } from './helpers.ts';
import { createSyncedAccount, leased, list, messageIn, outbox, rawMessage, readEveryFolder } from './sync-helpers.ts';

const TEXT = 'Tags <b> & "quotes" \u2028 café 😀\n  indented';

function htmlMessage(subject: string): string {
  return [
    'From: Bob <bob@example.test>',
    'To: Alice <alice@example.test>',
    `Subject: ${subject}`,
    `Message-ID: <${crypto.randomUUID()}@example.test>`,
    'MIME-Version: 1.0',
    'Content-Type: text/html; charset=utf-8',
    '',
    '<p>Hello <i>there</i></p>',
    '',
  ].join('\r\n');
}

describe('storing new mail', () => {
  it('keeps bodies compressed and a text-only body once, reads them back as before, and events keep a snapshot', async () => {
    const account = await createSyncedAccount();
    await account.stub.acquireLease('gw-1');
    const messages = [messageIn(1, rawMessage({ subject: 'text', text: TEXT })), messageIn(2, htmlMessage('html'))];
    await account.stub.applyChanges('gw-1', [{ type: 'messages', path: 'INBOX', uidvalidity: 1, messages }]);

    const { results: stored } = await account.db
      .prepare(
        'SELECT subject, body_html, body_plain, headers_json, date, updated_at, content FROM emails WHERE account_id = ? ORDER BY subject',
      )
      .bind(account.id)
      .all<{
        subject: string;
        body_html: null;
        body_plain: null;
        headers_json: string;
        date: string;
        updated_at: string;
        content: number[];
      }>();
    // The text columns stay empty: bodies are one compressed BLOB, the date is made from date_ms,
    // and updated_at is set only when the row changes.
    expect(stored.map((r) => [r.body_html, r.body_plain, r.headers_json, r.date, r.updated_at])).toEqual([
      [null, null, '[]', '', ''],
      [null, null, '[]', '', ''],
    ]);
    const unpacked = await Promise.all(stored.map((r) => unpackContent(r.content)));
    expect(unpacked.map((c) => c.html)).toEqual(['<p>Hello <i>there</i></p>', undefined]);
    // The header block stays in the raw source: the BLOB keeps its length (test/worker/headers-in-source.test.ts).
    expect(unpacked.map((c) => [c.headers, c.header_length! > 0])).toEqual([
      [undefined, true],
      [undefined, true],
    ]);
    const rows = stored.map((r, i) => ({ subject: r.subject, body_plain: unpacked[i]!.plain! }));

    // Who it is from and to is in the BLOB too; the row's JSON columns stay empty.
    const { results: json } = await account.db
      .prepare('SELECT from_json, to_json, cc_json, references_json FROM emails WHERE account_id = ?')
      .bind(account.id)
      .all<Record<string, string | null>>();
    expect(json.map((r) => Object.values(r))).toEqual([
      [null, '[]', '[]', '[]'],
      [null, '[]', '[]', '[]'],
    ]);
    expect(unpacked.map((c) => c.addressing)).toEqual(
      ['Bob', 'Bob Sender'].map((name) => ({
        from: { address: 'bob@example.test', name },
        to: [{ address: 'alice@example.test', name: 'Alice' }],
        cc: [],
        bcc: [],
        reply_to: [],
        references: [],
      })),
    );
    // The text body is indexed.
    const found = await list(`account_id=${account.id}&q=indented`);
    expect(found.data.map((e: any) => e.subject)).toEqual(['text']);

    const listed = await list(`account_id=${account.id}`);
    const text = listed.data.find((e: any) => e.subject === 'text');
    const single = await api('GET', `/${account.id}/emails/${text.id}`);
    expect(single.body.body).toBe(textToHtml(rows[1]!.body_plain));
    expect(single.body.body).toContain('&lt;b&gt; &amp; &quot;quotes&quot;');
    const { date_ms } = (await account.db.prepare('SELECT date_ms FROM emails WHERE id = ?').bind(text.id).first<{
      date_ms: number;
    }>())!;
    expect(single.body.date).toBe(new Date(date_ms).toISOString());
    expect(single.body.headers.find((h: { name: string }) => h.name === 'Subject')?.value).toBe('text');

    const { results: events } = await account.db
      .prepare("SELECT data_json FROM events WHERE account_id = ? AND type = 'email.new'")
      .bind(account.id)
      .all<{ data_json: string }>();
    expect(events).toHaveLength(2);
    for (const { data_json } of events) expect(data_json).toBe(JSON.stringify(JSON.parse(data_json)));
    // The outbox keeps no copy of the email, only a snapshot of it; read back, it is the email as
    // the list gives it, field for field and in the same order.
    const textEvent = events.map((e) => JSON.parse(e.data_json)).find((d) => d.id === text.id);
    expect(textEvent).toEqual({
      id: text.id,
      thread_id: text.thread_id,
      folder_ids: text.folder_ids,
      role: 'INBOX',
      unread: true,
      starred: false,
      body: null,
    });
    const delivered = (await outbox(account.id)).find((e) => e.type === 'email.new' && e.data.subject === 'text');
    expect(delivered!.data.body).toBe(single.body.body);
    expect(delivered!.data.body_plain).toBe(rows[1]!.body_plain);
    expect(JSON.stringify(delivered!.data)).toBe(JSON.stringify(text));

    // Snapshots written before held a few more fields, which never change: they read the same.
    const { object, message_id, origin, subject, provider_id } = text;
    const older = { object, id: text.id, message_id, origin, thread_id: text.thread_id, subject, provider_id };
    const olderJson = JSON.stringify({ ...older, ...textEvent, in_reply_to: null });
    await account.db
      .prepare("UPDATE events SET data_json = ? WHERE type = 'email.new' AND json_extract(data_json, '$.id') = ?")
      .bind(olderJson, text.id)
      .run();
    const again = (await outbox(account.id)).find((e) => e.type === 'email.new' && e.data.id === text.id);
    expect(JSON.stringify(again!.data)).toBe(JSON.stringify(text));
  });

  it("serves an event of a deleted email as it was made, from the email's email.delete", async () => {
    const account = await leased();
    const raw = htmlMessage('deleted later');
    await account.stub.applyChanges(account.gateway, [
      { type: 'messages', path: 'INBOX', uidvalidity: 1, messages: [messageIn(1, raw)] },
    ]);
    await account.stub.applyChanges(account.gateway, [
      { type: 'flags', path: 'INBOX', uidvalidity: 1, updates: [{ uid: 1, flags: ['\\Seen'] }] },
    ]);
    const before = await outbox(account.id);
    expect(before.map((e) => e.type)).toEqual(['email.new', 'email.update']);

    await account.stub.applyChanges(account.gateway, [{ type: 'vanished', path: 'INBOX', uidvalidity: 1, uids: [1] }]);
    await readEveryFolder(account.stub);
    expect((await list(`account_id=${account.id}`)).data).toEqual([]);
    const after = await outbox(account.id);
    expect(after.map((e) => e.type)).toEqual(['email.new', 'email.update', 'email.delete']);
    expect(JSON.stringify(after.slice(0, 2))).toBe(JSON.stringify(before));
    expect(after[0]!.data).toMatchObject({ unread: true, body: '<p>Hello <i>there</i></p>' });
    expect(after[1]!.data).toMatchObject({ unread: false });
  });
});

describe('the content BLOB', () => {
  const content = {
    html: '<table role="presentation"><tr><td>Caf\u00e9 \ud83d\ude00</td></tr></table>',
    plain: TEXT,
    headers: [
      { name: 'Received', value: 'from mx.example.test by mail.example.test with ESMTPS id 1' },
      { name: 'Subject', value: 'Re: dictionaries' },
    ],
  };

  it('names the dictionary it was compressed with and reads back the very same strings', async () => {
    const packed = await packContent(content);
    expect([...packed.subarray(0, 2)]).toEqual([0xfe, 1]);
    expect(await unpackContent(packed)).toEqual(content);
  });

  it('reads a BLOB written before dictionaries (bare deflate-raw)', async () => {
    const json = new Blob([JSON.stringify(content)]).stream().pipeThrough(new CompressionStream('deflate-raw'));
    const bare = new Uint8Array(await new Response(json).arrayBuffer());
    expect(bare[0]).not.toBe(0xfe);
    expect(await unpackContent(bare)).toEqual(content);
  });

  it('reads the addressing of a row written before it moved into the BLOB from the JSON columns', async () => {
    const account = await createSyncedAccount();
    await account.stub.acquireLease('gw-1');
    const raw = rawMessage({
      subject: 'older row',
      to: 'Alice <alice@example.test>, "Carl, Jr." <carl@example.test>',
      cc: 'dee@example.test',
      inReplyTo: '<a@example.test>',
      references: '<root@example.test> <a@example.test>',
    });
    const messages = [messageIn(1, raw)];
    await account.stub.applyChanges('gw-1', [{ type: 'messages', path: 'INBOX', uidvalidity: 1, messages }]);
    const [email] = (await list(`account_id=${account.id}`)).data;
    const before = (await api('GET', `/emails/${email.id}`)).body;

    const row = await account.db
      .prepare('SELECT content FROM emails WHERE id = ?')
      .bind(email.id)
      .first<{ content: number[] }>();
    const { addressing, ...rest } = await unpackContent(row!.content);
    expect(addressing!.to).toHaveLength(2);
    await account.db
      .prepare(
        `UPDATE emails SET content = ?, from_json = ?, to_json = ?, cc_json = ?, bcc_json = ?, reply_to_json = ?,
           references_json = ? WHERE id = ?`,
      )
      .bind(
        await packContent(rest),
        JSON.stringify(addressing!.from),
        ...(['to', 'cc', 'bcc', 'reply_to', 'references'] as const).map((k) => JSON.stringify(addressing![k])),
        email.id,
      )
      .run();
    const after = (await api('GET', `/emails/${email.id}`)).body;
    expect(after).toEqual(before);
    expect(after.cc_attendees).toEqual([
      { identifier: 'dee@example.test', display_name: '', identifier_type: 'EMAIL_ADDRESS' },
    ]);
  });

  it('keeps dictionary 1 byte for byte: BLOBs compressed with it read back only with the very same bytes', async () => {
    const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', CONTENT_DICTIONARIES[1]!));
    expect(CONTENT_DICTIONARIES[1]!.byteLength).toBe(8733);
    expect([...digest].map((b) => b.toString(16).padStart(2, '0')).join('')).toBe(
      '3dc3ef96bc68e288582fe1bc86abdc221b0e08749c6c3fadfa91f3742cbe35a0',
    );
  });

  it('refuses a dictionary it does not know, rather than reading wrong text', async () => {
    const packed = await packContent(content);
    packed[1] = 99;
    await expect(unpackContent(packed)).rejects.toThrow(/unknown dictionary \(99\)/);
  });
});
