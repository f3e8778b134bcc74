import { env } from 'cloudflare:workers';
import PostalMime from 'postal-mime';
import { describe, expect, it } from 'vitest';
import { fromBase64, toBase64 } from '../../worker/lib/crypto.ts';
import { normalizeAddress, parseMessage } from '../../worker/ingest/parse.ts';
import type { ParsedAddress, ParsedMessage } from '../../worker/ingest/types.ts';

/** A message from lines; each char is one byte, so '\xe9' is the Latin-1 byte 0xE9. */
function mail(lines: string[], eol = '\r\n'): Uint8Array {
  const text = lines.join(eol);
  return Uint8Array.from(text, (c) => c.charCodeAt(0));
}

const utf8Bytes = (text: string) => new TextEncoder().encode(text);
const b64 = (bytes: Uint8Array) => toBase64(bytes).replace(/.{76}/g, '$&\r\n');

// Fixture files, carried as base64 by the TEST_FIXTURES binding (see vitest.config.ts).
const fixtures = (env as unknown as { TEST_FIXTURES: Record<string, string> }).TEST_FIXTURES;
const fixture = (path: string) => fromBase64(fixtures[path]!);
const fixturePaths = (prefix: string) =>
  Object.keys(fixtures).filter((p) => p.startsWith(prefix) && !p.endsWith('.json') && !p.endsWith('.md'));

describe('parseMessage: headers and bodies', () => {
  const simple = mail([
    'Return-Path: <jorg@example.com>',
    'From: =?iso-8859-1?q?J=F6rg_M=FCller?= <Jorg@Example.COM>',
    'To: "Doe, Jane" <jane@example.org>, bob@example.net',
    'Cc: =?utf-8?B?5bGx55Sw?= <yamada@example.jp>',
    'Reply-To: replies@example.com',
    'Subject: =?utf-8?Q?Caf=C3=A9?= and',
    '  =?utf-8?B?8J+Ukg==?= news',
    'Date: Tue, 1 Jul 2003 10:52:37 +0200',
    'Message-ID: <abc.123@example.com>',
    'In-Reply-To: <parent@example.com> (your message)',
    'References: <root@example.com>',
    '  <parent@example.com>',
    'X-Custom: =?utf-8?Q?d=C3=A9cod=C3=A9?=',
    '',
    'Hello <team> & friends,',
    '',
    '  indented line',
  ]);

  it('reads addresses, subject, date, ids and decoded headers', async () => {
    const m = await parseMessage(simple);
    expect(m.from).toEqual({ address: 'Jorg@Example.COM', name: 'Jörg Müller' });
    expect(m.to).toEqual([
      { address: 'jane@example.org', name: 'Doe, Jane' },
      { address: 'bob@example.net', name: '' },
    ]);
    expect(m.cc).toEqual([{ address: 'yamada@example.jp', name: '山田' }]);
    expect(m.reply_to).toEqual([{ address: 'replies@example.com', name: '' }]);
    expect(m.bcc).toEqual([]);
    expect(m.subject).toBe('Café and  🔒 news'); // unfolding keeps the folding whitespace
    expect(m.date_ms).toBe(Date.UTC(2003, 6, 1, 8, 52, 37));
    expect(m.message_id).toBe('<abc.123@example.com>');
    expect(m.in_reply_to).toBe('<parent@example.com>');
    expect(m.references).toEqual(['<root@example.com>', '<parent@example.com>']);
    expect(m.headers.map((h) => h.name)).toEqual([
      'Return-Path',
      'From',
      'To',
      'Cc',
      'Reply-To',
      'Subject',
      'Date',
      'Message-ID',
      'In-Reply-To',
      'References',
      'X-Custom',
    ]);
    expect(m.headers.find((h) => h.name === 'X-Custom')?.value).toBe('décodé');
    expect(m.headers.find((h) => h.name === 'References')?.value).toBe('<root@example.com>  <parent@example.com>');
    expect(m.bounce).toBeNull();
    expect(normalizeAddress(m.from!.address)).toBe('jorg@example.com');
    expect(normalizeAddress('  Bob@Example.NET ')).toBe('bob@example.net');
  });

  it('renders a text-only body as escaped, pre-wrapped HTML', async () => {
    const m = await parseMessage(simple);
    expect(m.plain).toBe('Hello <team> & friends,\n\n  indented line');
    expect(m.html).toBe('<div style="white-space:pre-wrap">Hello &lt;team&gt; &amp; friends,\n\n  indented line</div>');
    expect(m.snippet).toBe('Hello <team> & friends, indented line');
    expect(m.attachments).toEqual([]);
    expect(m.has_attachments).toBe(false);
  });

  it('derives the plain text of an HTML-only body', async () => {
    const m = await parseMessage(
      mail([
        'From: a@example.com',
        'Content-Type: text/html; charset=utf-8',
        '',
        '<html><head><title>T</title><style>p{color:red}</style></head><body>',
        '<script>alert("x")</script><!-- hidden -->',
        '<h1>Title</h1><p>First&nbsp;para &amp; more&#33;</p><p>Line<br>break</p>',
        '<ul><li>one</li><li>two</li></ul><header>kept</header></body></html>',
      ]),
    );
    expect(m.html).toContain('<h1>Title</h1>');
    expect(m.plain).toBe('Title\n\nFirst para & more!\n\nLine\nbreak\n\n• one\n• two\n\nkept');
    expect(m.snippet).toBe('Title First para & more! Line break • one • two kept');
  });

  it('keeps the snippet to 200 characters', async () => {
    const m = await parseMessage(mail(['Subject: long', '', 'word '.repeat(500)]));
    expect(m.snippet.length).toBeLessThanOrEqual(200);
    expect(m.snippet.startsWith('word word')).toBe(true);
  });
});

describe('parseMessage: charsets and line endings', () => {
  const part = (charset: string, body: string, cte = '8bit') =>
    mail([
      'From: a@example.com',
      `Content-Type: text/plain; charset=${charset}`,
      `Content-Transfer-Encoding: ${cte}`,
      '',
      body,
    ]);

  it.each([
    ['iso-8859-1', 'caf\xe9', 'café'],
    ['iso-8859-2', '\xb1\xe6', 'ąć'],
    ['windows-1252', '\x80 \x93q\x94', '€ “q”'],
    ['koi8-r', '\xf0\xd2\xc9\xd7\xc5\xd4', 'Привет'],
    ['shift_jis', '\x93\xfa\x96\x7b', '日本'],
    ['iso-2022-jp', '\x1b$BF|K\\\x1b(B', '日本'],
    ['gb2312', '\xd6\xd0\xce\xc4', '中文'],
    ['gbk', '\xd6\xd0\xce\xc4', '中文'],
  ])('decodes %s bodies', async (charset, body, expected) => {
    expect((await parseMessage(part(charset, body))).plain).toBe(expected);
  });

  it('does not throw on an unknown charset', async () => {
    const m = await parseMessage(part('x-no-such-charset', 'plain ascii'));
    expect(m.plain).toBe('plain ascii');
  });

  it('reads raw 8-bit header values as UTF-8 when valid, else Latin-1', async () => {
    const m = await parseMessage(
      mail(['From: J\xf6rg <j@example.com>', `Subject: ${String.fromCharCode(...utf8Bytes('Grüße'))}`, '', 'x']),
    );
    expect(m.from).toEqual({ address: 'j@example.com', name: 'Jörg' });
    expect(m.subject).toBe('Grüße');
  });

  it('gives the same result for CRLF, LF-only and CR-only line endings', async () => {
    const lines = [
      'From: a@example.com',
      'Subject: endings',
      'Content-Type: multipart/mixed; boundary=XX',
      '',
      '--XX',
      'Content-Type: text/plain',
      '',
      'line one',
      'line two',
      '--XX',
      'Content-Type: application/octet-stream; name=a.bin',
      'Content-Transfer-Encoding: base64',
      '',
      'AAECAw==',
      '--XX--',
      '',
    ];
    const results = await Promise.all(['\r\n', '\n', '\r'].map((eol) => parseMessage(mail(lines, eol))));
    for (const m of results) {
      expect(m.subject).toBe('endings');
      expect(m.plain).toBe('line one\nline two');
      expect(m.attachments.map((a) => [a.filename, [...a.content]])).toEqual([['a.bin', [0, 1, 2, 3]]]);
    }
  });
});

describe('parseMessage: dates', () => {
  const dated = async (value: string | null) =>
    (await parseMessage(mail([...(value === null ? [] : [`Date: ${value}`]), 'Subject: d', '', 'x']))).date_ms;

  it('parses RFC 5322 and obsolete forms', async () => {
    expect(await dated('Mon, 2 Jan 2006 15:04:05 -0700')).toBe(Date.UTC(2006, 0, 2, 22, 4, 5));
    expect(await dated('2 Jan 06 15:04 EST')).toBe(Date.UTC(2006, 0, 2, 20, 4, 0));
    expect(await dated('Mon Jan  2 15:04:05 2006')).toBe(Date.UTC(2006, 0, 2, 15, 4, 5));
    expect(await dated('Thu, 13 Feb 1997 22:02:33 +0000 (GMT)')).toBe(Date.UTC(1997, 1, 13, 22, 2, 33));
    expect(await dated('Fri, 21-Nov-1997 09:55:06 GMT')).toBe(Date.UTC(1997, 10, 21, 9, 55, 6));
  });

  it('is null when missing or garbage', async () => {
    expect(await dated(null)).toBeNull();
    expect(await dated('')).toBeNull();
    expect(await dated('1')).toBeNull();
    expect(await dated('not a date at all')).toBeNull();
    expect(await dated('Mon, 45 Foo 2006 99:99:99')).toBeNull();
  });
});

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

describe('parseMessage: identity fingerprint', () => {
  const base = [
    'From: a@example.com',
    'To: b@example.com',
    'Subject: Quarterly numbers',
    'Date: Mon, 2 Jan 2006 15:04:05 +0000',
    '',
    'The numbers are in.',
  ];
  const fp = async (lines: string[], eol = '\r\n') => (await parseMessage(mail(lines, eol))).fingerprint;

  it('is the same for copies that differ only in trace headers and line endings', async () => {
    const copy = [
      'Return-Path: <a@example.com>',
      'Delivered-To: b@example.com',
      'Received: from mx.example.com by imap.example.com; Mon, 2 Jan 2006 15:04:07 +0000',
      'X-Spam-Status: No',
      'X-GM-Labels: Important',
      ...base,
    ];
    expect(await fp(copy, '\n')).toBe(await fp(base));
    expect(await fp(base)).toMatch(/^[0-9a-f]{64}$/);
  });

  it('differs for different messages', async () => {
    const original = await fp(base);
    expect(await fp(base.map((l) => l.replace('in.', 'out.')))).not.toBe(original);
    expect(await fp(base.map((l) => l.replace('15:04:05', '15:04:06')))).not.toBe(original);
    expect(await fp(base.map((l) => l.replace('To: b@', 'To: c@')))).not.toBe(original);
    expect(await fp(base.map((l) => l.replace('Quarterly', 'Monthly')))).not.toBe(original);
  });
});

describe('parseMessage: bounces', () => {
  const dsn = (action: string, status: string) =>
    mail([
      'From: Mail Delivery System <MAILER-DAEMON@mx.example.net>',
      'To: sender@example.com',
      'Subject: Undelivered Mail Returned to Sender',
      'Content-Type: multipart/report; report-type=delivery-status; boundary="R"',
      '',
      '--R',
      'Content-Type: text/plain',
      '',
      "I'm sorry to have to inform you that your message could not be delivered.",
      '--R',
      'Content-Type: message/delivery-status',
      '',
      'Reporting-MTA: dns; mx.example.net',
      '',
      'Final-Recipient: rfc822; Gone@Example.org',
      `Action: ${action}`,
      `Status: ${status}`,
      'Diagnostic-Code: smtp; 550 5.1.1 <gone@example.org>: Recipient address',
      '    rejected: User unknown',
      '--R',
      'Content-Type: message/rfc822',
      '',
      'From: sender@example.com',
      'Message-ID: <original@example.com>',
      'Subject: hi',
      '',
      'hello',
      '--R--',
    ]);

  it('reads a standard delivery-status report', async () => {
    const m = await parseMessage(dsn('failed', '5.1.1'));
    expect(m.bounce).toEqual({
      original_message_id: '<original@example.com>',
      recipient: 'Gone@Example.org',
      status: '5.1.1',
      action: 'failed',
      diagnostic: '550 5.1.1 <gone@example.org>: Recipient address rejected: User unknown',
    });
    expect((await parseMessage(dsn('delayed', '4.4.1'))).bounce).toMatchObject({ action: 'delayed', status: '4.4.1' });
  });

  it('does not flag a successful delivery report', async () => {
    expect((await parseMessage(dsn('delivered', '2.0.0'))).bounce).toBeNull();
  });

  it('reads a qmail report', async () => {
    const m = await parseMessage(
      mail([
        'From: MAILER-DAEMON@mail.example.net',
        'Subject: failure notice',
        '',
        'Hi. This is the qmail-send program at mail.example.net.',
        "I'm afraid I wasn't able to deliver your message to the following addresses.",
        "This is a permanent error; I've given up. Sorry it didn't work out.",
        '',
        '<nobody@example.org>:',
        'Sorry, no mailbox here by that name. (#5.1.1)',
        '',
        '--- Below this line is a copy of the message.',
        '',
        'Message-ID: <orig-q@example.com>',
        'To: someone-else@example.com',
      ]),
    );
    expect(m.bounce).toEqual({
      original_message_id: '<orig-q@example.com>',
      recipient: 'nobody@example.org',
      status: '5.1.1',
      action: 'failed',
      diagnostic: 'Sorry, no mailbox here by that name. (#5.1.1)',
    });
  });

  it('does not flag a person writing about a bounce', async () => {
    const m = await parseMessage(
      mail([
        'From: Colleague <colleague@example.com>',
        'Subject: Re: Undelivered Mail Returned to Sender',
        '',
        'My message to bob@example.org could not be delivered, user unknown. Any idea?',
      ]),
    );
    expect(m.bounce).toBeNull();
  });
});

function expectSane(m: ParsedMessage): void {
  const isAddress = (a: ParsedAddress) =>
    typeof a.address === 'string' && a.address.length > 0 && typeof a.name === 'string';
  expect(m.message_id === null || /^<[^<>]+>$/.test(m.message_id)).toBe(true);
  expect(m.in_reply_to === null || /^<[^<>]+>$/.test(m.in_reply_to)).toBe(true);
  expect(m.references.every((r) => /^<[^<>]+>$/.test(r))).toBe(true);
  expect(typeof m.subject).toBe('string');
  expect(m.date_ms === null || Number.isFinite(m.date_ms)).toBe(true);
  expect(m.from === null || isAddress(m.from)).toBe(true);
  expect([...m.to, ...m.cc, ...m.bcc, ...m.reply_to].every(isAddress)).toBe(true);
  expect(typeof m.html).toBe('string');
  expect(typeof m.plain).toBe('string');
  expect(m.snippet.length).toBeLessThanOrEqual(200);
  expect(m.snippet).not.toMatch(/\s{2}|^\s|\s$/);
  expect(m.headers.every((h) => typeof h.name === 'string' && h.name.length > 0 && typeof h.value === 'string')).toBe(
    true,
  );
  for (const a of m.attachments) {
    expect(a.filename.length).toBeGreaterThan(0);
    expect(a.extension).toMatch(/^[^.A-Z]*$/);
    expect(a.mime).toMatch(/^[^/\s]+\/[^/\s]+$/);
    expect(a.content).toBeInstanceOf(Uint8Array);
    expect(a.size).toBe(a.content.byteLength);
    expect(a.cid === null || (a.cid.length > 0 && !/^<|>$/.test(a.cid))).toBe(true);
  }
  expect(m.has_attachments).toBe(m.attachments.length > 0);
  expect(m.fingerprint).toMatch(/^[0-9a-f]{64}$/);
}

describe('real-world corpora', () => {
  const corpus = fixturePaths('corpus/');
  const bounces = fixturePaths('bounces/');
  const manifest = JSON.parse(new TextDecoder().decode(fixture('bounces/manifest.json'))) as Record<string, string>;

  it('has the fixtures (more than 500 messages, 50+ bounces with an expected recipient)', () => {
    expect(corpus.length + bounces.length).toBeGreaterThan(500);
    expect(Object.keys(manifest).length).toBeGreaterThanOrEqual(50);
    expect(Object.keys(manifest).every((path) => bounces.includes(`bounces/${path}`))).toBe(true);
  });

  it('parses every message into sane output', async () => {
    for (const path of [...corpus, ...bounces]) {
      const m = await parseMessage(fixture(path)).catch((error: unknown) => {
        throw new Error(`${path}: ${String(error)}`);
      });
      try {
        expectSane(m);
      } catch (error) {
        throw new Error(`${path}: ${String(error)}`);
      }
    }
  }, 120_000);

  it('never flags ordinary mail as a bounce', async () => {
    const flagged: string[] = [];
    for (const path of corpus) {
      if ((await parseMessage(fixture(path))).bounce) flagged.push(path);
    }
    expect(flagged).toEqual([]);
  }, 120_000);

  it('finds the failed recipient of every bounce in the manifest', async () => {
    const wrong: string[] = [];
    for (const [path, recipient] of Object.entries(manifest)) {
      const { bounce } = await parseMessage(fixture(`bounces/${path}`));
      if (!bounce || normalizeAddress(bounce.recipient) !== normalizeAddress(recipient)) {
        wrong.push(`${path}: expected ${recipient}, got ${bounce?.recipient ?? 'no bounce'}`);
      } else {
        expect(bounce.action).toMatch(/^(?:failed|delayed)$/);
        expect(bounce.status).toMatch(/^[45]\.\d{1,3}\.\d{1,3}$/);
      }
    }
    expect(wrong).toEqual([]);
  }, 120_000);
});
