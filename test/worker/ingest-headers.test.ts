// Parsing a message's headers and bodies: addresses, subject, date and ids decoded, text-only and
// HTML-only bodies, the snippet, charsets (8-bit headers too), line endings, dates in every form,
// and the identity fingerprint that copies of one message share.
import { describe, expect, it } from 'vitest';
import { normalizeAddress, parseMessage } from '../../worker/ingest/parse.ts';
import { mail, utf8Bytes } from './ingest-helpers.ts';

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
