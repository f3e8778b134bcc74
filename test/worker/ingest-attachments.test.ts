// Parsing a message's parts: attachments and inline images with their names, sizes, types, content
// ids and bytes, broken multiparts, a 12 MB attachment; and input postal-mime cannot parse (nesting
// too deep, nothing, binary noise, headers only), which still yields a sane message.
import PostalMime from 'postal-mime';
import { describe, expect, it } from 'vitest';
import { parseMessage } from '../../worker/ingest/parse.ts';
import { b64, expectSane, mail, utf8Bytes } from './ingest-helpers.ts';

describe('parseMessage: attachments', () => {
  const pdf = utf8Bytes('%PDF-1.4 fake');
  const png = Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 1, 2, 255]);
  const tnef = Uint8Array.from([0x78, 0x9f, 0x3e, 0x22, 1, 2, 3]);
  const nested = mail([
    'From: a@example.com',
    'Subject: nested',
    'Content-Type: multipart/mixed; boundary="outer"',
    '',
    '--outer',
    'Content-Type: multipart/alternative; boundary="alt"',
    '',
    '--alt',
    'Content-Type: text/plain; charset=utf-8',
    '',
    'See the picture.',
    '--alt',
    'Content-Type: multipart/related; boundary="rel"',
    '',
    '--rel',
    'Content-Type: text/html; charset=utf-8',
    '',
    '<p>See <img src="cid:logo@x"></p>',
    '--rel',
    'Content-Type: image/png',
    'Content-ID: <logo@x>',
    'Content-Transfer-Encoding: base64',
    '',
    b64(png),
    '--rel--',
    '--alt--',
    '--outer',
    "Content-Type: application/pdf; name*=utf-8''R%C3%A9sum%C3%A9.PDF",
    "Content-Disposition: attachment; filename*0*=utf-8''R%C3%A9sum; filename*1*=%C3%A9.PDF",
    'Content-Transfer-Encoding: base64',
    '',
    b64(pdf),
    '--outer',
    'Content-Type: application/ms-tnef; name="winmail.dat"',
    'Content-Disposition: attachment; filename="winmail.dat"',
    'Content-Transfer-Encoding: base64',
    '',
    b64(tnef),
    '--outer',
    'Content-Type: message/rfc822',
    '',
    'From: inner@example.com',
    'Subject: forwarded',
    'Message-ID: <inner@example.com>',
    '',
    'inner body',
    '--outer',
    'Content-Type: application/octet-stream',
    'Content-Disposition: attachment; filename="=?utf-8?B?0L7RgtGH0ZHRgi50eHQ=?="',
    '',
    'report',
    '--outer--',
    '',
  ]);

  it('lists real attachments and inline images with name, extension, size, mime, cid and bytes', async () => {
    const m = await parseMessage(nested);
    expect(m.plain).toBe('See the picture.');
    expect(m.html).toBe('<p>See <img src="cid:logo@x"></p>');
    expect(m.has_attachments).toBe(true);
    const summary = m.attachments.map(({ content: _content, ...rest }) => rest);
    expect(summary).toEqual([
      { filename: 'image.png', extension: 'png', mime: 'image/png', size: png.length, cid: 'logo@x', inline: true },
      { filename: 'Résumé.PDF', extension: 'pdf', mime: 'application/pdf', size: pdf.length, cid: null, inline: false },
      {
        filename: 'winmail.dat',
        extension: 'dat',
        mime: 'application/ms-tnef',
        size: tnef.length,
        cid: null,
        inline: false,
      },
      { filename: 'message.eml', extension: 'eml', mime: 'message/rfc822', size: 87, cid: null, inline: false },
      { filename: 'отчёт.txt', extension: 'txt', mime: 'application/octet-stream', size: 7, cid: null, inline: false },
    ]);
    // Parts without a transfer encoding come back as postal-mime gives them: LF line ends, final LF kept.
    const text = (i: number) => new TextDecoder().decode(m.attachments[i]!.content);
    expect(text(3)).toBe(
      'From: inner@example.com\nSubject: forwarded\nMessage-ID: <inner@example.com>\n\ninner body\n',
    );
    expect(text(4)).toBe('report\n');
    expect(m.attachments[0]!.content).toEqual(png);
    expect(m.attachments[1]!.content).toEqual(pdf);
    expect(m.attachments[2]!.content).toEqual(tnef);
  });

  it('survives missing boundaries, a missing boundary parameter and bad base64', async () => {
    const m = await parseMessage(
      mail([
        'From: a@example.com',
        'Content-Type: multipart/mixed; boundary="b"',
        '',
        '--b',
        'Content-Type: text/plain',
        '',
        'before',
        '--b',
        'Content-Type: application/octet-stream; name=x.bin',
        'Content-Transfer-Encoding: base64',
        '',
        'AAEC!!!not*base64%%%AwQ=',
        '', // no closing boundary
      ]),
    );
    expect(m.plain).toBe('before');
    expect(m.attachments).toHaveLength(1);
    expect(m.attachments[0]!.filename).toBe('x.bin');

    const noBoundary = await parseMessage(mail(['Subject: nb', 'Content-Type: multipart/mixed', '', 'just text', '']));
    expect(noBoundary.subject).toBe('nb');
    expect(typeof noBoundary.plain).toBe('string');
  });

  it('handles a 12 MB attachment', async () => {
    const big = new Uint8Array(12 * 1024 * 1024);
    for (let i = 0; i < big.length; i++) big[i] = (i * 31) & 0xff;
    const m = await parseMessage(
      mail([
        'From: a@example.com',
        'Subject: big',
        'Content-Type: multipart/mixed; boundary=B',
        '',
        '--B',
        'Content-Type: text/plain',
        '',
        'attached',
        '--B',
        'Content-Type: application/zip; name="Data.ZIP"',
        'Content-Transfer-Encoding: base64',
        '',
        b64(big),
        '--B--',
      ]),
    );
    expect(m.attachments).toHaveLength(1);
    expect(m.attachments[0]!.size).toBe(big.length);
    expect(m.attachments[0]!.extension).toBe('zip');
    expect(m.attachments[0]!.content).toEqual(big);
  }, 60_000);
});

describe('parseMessage: input postal-mime cannot parse', () => {
  // Nesting beyond postal-mime's limit makes it throw; the parser must still return the message.
  const depth = 300;
  const raw = mail([
    'From: Ann <ann@example.com>',
    'Subject: too deep',
    'Date: Mon, 2 Jan 2006 15:04:05 +0000',
    'Message-ID: <deep@example.com>',
    'Content-Type: multipart/mixed; boundary=q',
    '',
    ...Array.from({ length: depth }, () => '--q\r\nContent-Type: multipart/mixed; boundary=q\r\n'),
    'the end',
  ]);

  it('still yields headers and the body as text', async () => {
    await expect(PostalMime.parse(raw)).rejects.toThrow();
    const m = await parseMessage(raw);
    expect(m.from).toEqual({ address: 'ann@example.com', name: 'Ann' });
    expect(m.subject).toBe('too deep');
    expect(m.message_id).toBe('<deep@example.com>');
    expect(m.date_ms).toBe(Date.UTC(2006, 0, 2, 15, 4, 5));
    expect(m.plain.endsWith('the end')).toBe(true);
    expect(m.html.startsWith('<div style="white-space:pre-wrap">')).toBe(true);
    expect(m.attachments).toEqual([]);
    expect(m.fingerprint).toMatch(/^[0-9a-f]{64}$/);
  });

  it('copes with empty input, binary noise and a header-only message', async () => {
    for (const input of [
      new Uint8Array(0),
      crypto.getRandomValues(new Uint8Array(4096)),
      mail(['Subject: only headers']),
    ]) {
      const m = await parseMessage(input);
      expectSane(m);
    }
    expect((await parseMessage(new ArrayBuffer(0))).subject).toBe('');
  });
});
