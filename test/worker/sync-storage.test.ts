// How a new email is stored: a text-only body once (its HTML made again on reading), JSON columns and
// the outbox row's data as the JSON they were made of, and a body the row holds indexed from the row.
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { textToHtml } from '../../worker/ingest/html.ts';
import { api } from './helpers.ts';
import { createSyncedAccount, list, messageIn, rawMessage } from './sync-helpers.ts';

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
  it('keeps a text-only body once, reads it back as before, and stores event data as made', async () => {
    const account = await createSyncedAccount();
    await account.stub.acquireLease('gw-1');
    const messages = [messageIn(1, rawMessage({ subject: 'text', text: TEXT })), messageIn(2, htmlMessage('html'))];
    await account.stub.applyChanges('gw-1', [{ type: 'messages', path: 'INBOX', uidvalidity: 1, messages }]);

    const { results: rows } = await env.DB.prepare(
      'SELECT subject, body_html, body_plain FROM emails WHERE account_id = ? ORDER BY subject',
    )
      .bind(account.id)
      .all<{ subject: string; body_html: string | null; body_plain: string }>();
    expect(rows.map((r) => [r.subject, r.body_html])).toEqual([
      ['html', '<p>Hello <i>there</i></p>'],
      ['text', null],
    ]);

    const { results: json } = await env.DB.prepare(
      'SELECT from_json, to_json, references_json, headers_json FROM emails WHERE account_id = ?',
    )
      .bind(account.id)
      .all<Record<string, string>>();
    for (const row of json) for (const text of Object.values(row)) expect(text).toBe(JSON.stringify(JSON.parse(text)));
    expect(json.map((r) => JSON.parse(r.from_json!).address)).toEqual(['bob@example.test', 'bob@example.test']);
    // The index reads a body the row holds from the row.
    const found = await list(`account_id=${account.id}&q=indented`);
    expect(found.data.map((e: any) => e.subject)).toEqual(['text']);

    const listed = await list(`account_id=${account.id}`);
    const text = listed.data.find((e: any) => e.subject === 'text');
    const single = await api('GET', `/${account.id}/emails/${text.id}`);
    expect(single.body.body).toBe(textToHtml(rows[1]!.body_plain));
    expect(single.body.body).toContain('&lt;b&gt; &amp; &quot;quotes&quot;');

    const { results: events } = await env.DB.prepare(
      "SELECT data_json FROM events WHERE account_id = ? AND type = 'email.new'",
    )
      .bind(account.id)
      .all<{ data_json: string }>();
    expect(events).toHaveLength(2);
    for (const { data_json } of events) expect(data_json).toBe(JSON.stringify(JSON.parse(data_json)));
    const textEvent = events.map((e) => JSON.parse(e.data_json)).find((d) => d.subject === 'text');
    expect(textEvent.body).toBe(single.body.body);
    expect(textEvent.body_plain).toBe(rows[1]!.body_plain);
  });
});
