// GET /emails filters: each one alone (accounts, folders and roles, addresses, flags, subject, dates,
// headers), combined, the 400s for what cannot be read, and a query plan that searches an index for each.
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { buildEmailQuery, type EmailListQuery } from '../../worker/emails/query.ts';
import { encodeCursor } from '../../worker/lib/paging.ts';
import { api, expectError } from './helpers.ts';
import { listEmails, minute, readAccount, sorted, subjects } from './read-helpers.ts';
import { rawMessage } from './sync-helpers.ts';

describe('GET /emails filters', () => {
  it('account_id: one account only, newest first', async () => {
    const a = await readAccount();
    const b = await readAccount();
    await a.deliver('INBOX', { subject: 'a1', date: minute(1) }, { subject: 'a2', date: minute(2) });
    await b.deliver('INBOX', { subject: 'b1', date: minute(3) });
    expect(subjects(await listEmails(`account_id=${a.id}`))).toEqual(['a2', 'a1']);
    expect(subjects(await listEmails(`account_id=${b.id}`))).toEqual(['b1']);
    // Malformed or unknown ids in a filter find nothing.
    expect((await listEmails('account_id=acc_nope')).data).toEqual([]);
    expect((await listEmails('account_id=acc_01KAAAAAAAAAAAAAAAAAAAAAAA')).data).toEqual([]);
  });

  it('folder: by fld_ id, role name (any case) and provider path; role: the main role only', async () => {
    const a = await readAccount();
    await a.deliver('INBOX', { subject: 'in inbox' });
    await a.deliver('Projects/2026', { subject: 'in project' });
    const both = rawMessage({ subject: 'to myself', from: a.email, to: a.email });
    await a.deliverRaw('Sent', [{ raw: both }]);
    await a.deliverRaw('INBOX', [{ raw: both }]);
    const folders = (await api('GET', `/folders?account_id=${a.id}`)).body.data;
    const project = folders.find((f: any) => f.provider_id === 'Projects/2026');
    const base = `account_id=${a.id}`;

    expect(sorted(await listEmails(`${base}&folder=${project.id}`))).toEqual(['in project']);
    expect(sorted(await listEmails(`${base}&folder=Projects/2026`))).toEqual(['in project']);
    expect(sorted(await listEmails(`${base}&folder=INBOX`))).toEqual(['in inbox', 'to myself']);
    expect(sorted(await listEmails(`${base}&folder=inbox`))).toEqual(['in inbox', 'to myself']);
    expect(sorted(await listEmails(`${base}&folder=SENT`))).toEqual(['to myself']);
    expect((await listEmails(`${base}&folder=fld_01KAAAAAAAAAAAAAAAAAAAAAAA`)).data).toEqual([]);
    // In Inbox and Sent, the email's main role is one of them; role matches only that one.
    const mine = (await listEmails(`${base}&subject=to myself`)).data[0];
    const other = mine.role === 'INBOX' ? 'SENT' : 'INBOX';
    expect(sorted(await listEmails(`${base}&role=${mine.role}`))).toContain('to myself');
    expect(sorted(await listEmails(`${base}&role=${other}`))).not.toContain('to myself');
    expect(sorted(await listEmails(`${base}&role=UNKNOWN`))).toEqual(['in project']);
    // Enum-valued filters take any case (docs/api.md).
    expect(sorted(await listEmails(`${base}&role=unknown`))).toEqual(['in project']);
    expectError(await api('GET', `/emails?${base}&role=inboxes`), 400, 'invalid_parameters');
  });

  it('from, to, any_email: exact addresses, case-insensitive; to covers to, cc and bcc', async () => {
    const a = await readAccount();
    await a.deliver(
      'INBOX',
      { subject: 'from carol', from: 'Carol <carol@example.test>', to: 'Alice <alice@example.test>' },
      { subject: 'from dave', from: 'Dave <dave@example.test>', to: 'Alice <alice@example.test>' },
      {
        subject: 'carol in cc',
        from: 'Dave <dave@example.test>',
        to: 'Alice <alice@example.test>',
        cc: 'carol@example.test',
      },
      { subject: 'to erin', from: 'Dave <dave@example.test>', to: 'Erin <erin@example.test>' },
    );
    const base = `account_id=${a.id}`;
    expect(sorted(await listEmails(`${base}&from=Carol@Example.TEST`))).toEqual(['from carol']);
    expect(sorted(await listEmails(`${base}&from=dave@example.test`))).toEqual(['carol in cc', 'from dave', 'to erin']);
    expect(sorted(await listEmails(`${base}&to=carol@example.test`))).toEqual(['carol in cc']);
    expect(sorted(await listEmails(`${base}&to=ERIN@example.test`))).toEqual(['to erin']);
    expect(sorted(await listEmails(`${base}&any_email=carol@example.test`))).toEqual(['carol in cc', 'from carol']);
    expect((await listEmails(`${base}&from=nobody@example.test`)).data).toEqual([]);
  });

  it('thread_id, unread, starred, has_attachments', async () => {
    const a = await readAccount();
    const root = '<root-flags@example.test>';
    await a.deliver(
      'INBOX',
      { subject: 'root', messageId: root, flags: ['\\Seen'] },
      { subject: 'reply', inReplyTo: root, references: root, flags: ['\\Seen', '\\Flagged'] },
      { subject: 'unread with file', attachment: { name: 'a.txt', type: 'text/plain', content: 'x' } },
    );
    const base = `account_id=${a.id}`;
    const rootEmail = (await listEmails(`${base}&subject=root`)).data[0];
    expect(sorted(await listEmails(`${base}&thread_id=${rootEmail.thread_id}`))).toEqual(['reply', 'root']);
    expect((await listEmails(`thread_id=thr_nope`)).data).toEqual([]);
    expect(sorted(await listEmails(`${base}&unread=true`))).toEqual(['unread with file']);
    expect(sorted(await listEmails(`${base}&unread=false`))).toEqual(['reply', 'root']);
    expect(sorted(await listEmails(`${base}&starred=true`))).toEqual(['reply']);
    expect(sorted(await listEmails(`${base}&starred=false`))).toEqual(['root', 'unread with file']);
    expect(sorted(await listEmails(`${base}&has_attachments=true`))).toEqual(['unread with file']);
    expect(sorted(await listEmails(`${base}&has_attachments=false`))).toEqual(['reply', 'root']);
    expectError(await api('GET', `/emails?${base}&unread=yes`), 400, 'invalid_parameters');
  });

  it('subject (case-insensitive substring), after and before (strict), include_headers', async () => {
    const a = await readAccount();
    await a.deliver(
      'INBOX',
      { subject: 'Quarterly REPORT', date: minute(10) },
      { subject: 'lunch', date: minute(20) },
      { subject: 'reporting lines', date: minute(30) },
    );
    const base = `account_id=${a.id}`;
    expect(sorted(await listEmails(`${base}&subject=rEpOrT`))).toEqual(['Quarterly REPORT', 'reporting lines']);
    // Case-insensitive beyond ASCII too.
    const b = await readAccount();
    await b.deliver(
      'INBOX',
      { subject: 'ÜBERWEISUNG für Ölheizung', date: minute(40) },
      { subject: 'uberweisung', date: minute(41) },
    );
    expect(sorted(await listEmails(`account_id=${b.id}&subject=${encodeURIComponent('überweisung')}`))).toEqual([
      'ÜBERWEISUNG für Ölheizung',
    ]);
    expect(sorted(await listEmails(`account_id=${b.id}&subject=${encodeURIComponent('ÖLHEIZ')}`))).toEqual([
      'ÜBERWEISUNG für Ölheizung',
    ]);
    expect(sorted(await listEmails(`${base}&subject=port`))).toEqual(['Quarterly REPORT', 'reporting lines']);
    const at = (m: number) => encodeURIComponent(new Date(Date.UTC(2026, 0, 1) + m * 60_000).toISOString());
    expect(sorted(await listEmails(`${base}&after=${at(10)}`))).toEqual(['lunch', 'reporting lines']);
    expect(sorted(await listEmails(`${base}&before=${at(30)}`))).toEqual(['Quarterly REPORT', 'lunch']);
    expect(sorted(await listEmails(`${base}&after=${at(10)}&before=${at(30)}`))).toEqual(['lunch']);
    expectError(await api('GET', `/emails?${base}&after=yesterday`), 400, 'invalid_parameters');

    const plain = (await listEmails(base)).data[0];
    expect(plain).not.toHaveProperty('headers');
    const withHeaders = (await listEmails(`${base}&include_headers=true`)).data[0];
    expect(withHeaders.headers.map((h: any) => h.name)).toEqual(
      expect.arrayContaining(['Message-ID', 'Subject', 'Date']),
    );
  });

  it('combines filters: account + folder + unread, from + after + has_attachments', async () => {
    const a = await readAccount();
    const b = await readAccount();
    const file = { name: 'f.pdf', type: 'application/pdf', content: '%PDF' };
    for (const acc of [a, b]) {
      await acc.deliver(
        'INBOX',
        { subject: 'inbox unread' },
        { subject: 'inbox read', flags: ['\\Seen'] },
        { subject: 'carol old file', from: 'carol@example.test', date: minute(1), attachment: file },
        {
          subject: 'carol new file',
          from: 'carol@example.test',
          date: minute(100),
          attachment: file,
          flags: ['\\Seen'],
        },
        { subject: 'carol new plain', from: 'carol@example.test', date: minute(101), flags: ['\\Seen'] },
        { subject: 'dave new file', from: 'dave@example.test', date: minute(102), attachment: file, flags: ['\\Seen'] },
      );
      await acc.deliver('Archive', { subject: 'archived unread' });
    }
    expect(sorted(await listEmails(`account_id=${a.id}&folder=INBOX&unread=true`))).toEqual([
      'carol old file',
      'inbox unread',
    ]);
    const after = encodeURIComponent(new Date(Date.UTC(2026, 0, 1) + 50 * 60_000).toISOString());
    // Across accounts (no account_id): one per account.
    expect(
      sorted(await listEmails(`from=carol@example.test&after=${after}&has_attachments=true&limit=250`)).filter((s) =>
        s.startsWith('carol'),
      ),
    ).toEqual(['carol new file', 'carol new file']);
    expect(
      sorted(await listEmails(`account_id=${b.id}&from=carol@example.test&after=${after}&has_attachments=true`)),
    ).toEqual(['carol new file']);
  });

  it('rejects what it cannot read with a 400 naming the parameter', async () => {
    for (const query of [
      'limit=0',
      'limit=251',
      'starred=1',
      'before=2026-13-45',
      'subject=',
      'q=',
      'cursor=garbage',
    ]) {
      const error = expectError(await api('GET', `/emails?${query}`), 400, 'invalid_parameters');
      expect(error.detail).toContain(query.split('=')[0]);
    }
  });
});

describe('query plans', () => {
  const account = 'acc_01KAAAAAAAAAAAAAAAAAAAAAAA';
  const cases: Record<string, Partial<EmailListQuery>> = {
    account_id: { account_id: account },
    'account_id + folder + unread': { account_id: account, folder: 'fld_01KAAAAAAAAAAAAAAAAAAAAAAA', unread: true },
    'account_id + folder role + unread': { account_id: account, folder: 'INBOX', unread: true },
    'account_id + role': { account_id: account, role: 'INBOX' },
    'from + after + has_attachments': {
      from: 'carol@example.test',
      after: Date.UTC(2026, 0, 1),
      has_attachments: true,
    },
    thread_id: { thread_id: 'thr_01KAAAAAAAAAAAAAAAAAAAAAAA' },
    to: { to: 'carol@example.test' },
    q: { q: 'invoice' },
    'account_id + q': { account_id: account, q: 'invoice' },
    'account_id + starred': { account_id: account, starred: true },
    'account_id + cursor': {
      account_id: account,
      cursor: encodeCursor([Date.UTC(2026, 0, 1), 'email_01KAAAAAAAAAAAAAAAAAAAAAAA'], `account_id=${account}`),
    },
  };
  for (const [name, filters] of Object.entries(cases)) {
    it(`${name}: searches an index, never scans the emails table`, async () => {
      const built = buildEmailQuery({ limit: 100, ...filters });
      const { results } = await env.DB.prepare(`EXPLAIN QUERY PLAN ${built.sql}`)
        .bind(...built.params)
        .all<{ detail: string }>();
      const plan = results.map((r) => r.detail);
      expect(
        plan.some((d) => /^SEARCH e USING (COVERING )?INDEX /.test(d)),
        plan.join('\n'),
      ).toBe(true);
      expect(
        plan.filter((d) => /^SCAN (e|ef|p|s)\b/.test(d)),
        plan.join('\n'),
      ).toEqual([]);
    });
  }
});
