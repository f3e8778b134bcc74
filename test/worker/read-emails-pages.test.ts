// Pages of GET /emails and GET /drafts: keyset paging while mail arrives, cursors bound to their
// filters, drafts listed as Draft items, and the fields of an email in a list.
import { describe, expect, it } from 'vitest';
import { api, expectError } from './helpers.ts';
import { EMAIL_FIELDS, listEmails, minute, readAccount, sorted, subjects } from './read-helpers.ts';

describe('keyset paging', () => {
  it('visits 600 emails in pages of 250 exactly once while newer mail arrives', async () => {
    const a = await readAccount();
    const batch = (from: number, to: number) =>
      Array.from({ length: to - from }, (_, i) => ({ subject: `m${from + i}`, date: minute(from + i) }));
    // Two emails per minute for part of the range: ties on date are ordered by id.
    await a.deliver('INBOX', ...batch(0, 300));
    await a.deliver('INBOX', ...batch(300, 600).map((m, i) => ({ ...m, date: minute(300 + Math.floor(i / 2)) })));
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: Awaited<ReturnType<typeof listEmails>> = await listEmails(
        `account_id=${a.id}&limit=250${cursor ? `&cursor=${cursor}` : ''}`,
      );
      seen.push(...subjects(page));
      cursor = page.cursor;
      pages++;
      // New mail between pages: dated now, so it sorts before the first page.
      await a.deliver('INBOX', { subject: `new during page ${pages}` });
      expect(page.has_more).toBe(cursor !== null);
    } while (cursor);
    expect(pages).toBe(3);
    expect(seen).toHaveLength(600);
    expect(new Set(seen).size).toBe(600);
    expect(seen.some((s) => s.startsWith('new'))).toBe(false);
  }, 60_000);

  it('binds a cursor to its filters', async () => {
    const a = await readAccount();
    await a.deliver('INBOX', { subject: 'one' }, { subject: 'two' });
    const first = await listEmails(`account_id=${a.id}&limit=1`);
    expect(first.has_more).toBe(true);
    const again = await listEmails(`account_id=${a.id}&limit=1&cursor=${first.cursor}`);
    expect(again.data).toHaveLength(1);
    expect(again.data[0].id).not.toBe(first.data[0].id);
    expectError(
      await api('GET', `/emails?account_id=${a.id}&unread=true&limit=1&cursor=${first.cursor}`),
      400,
      'invalid_parameters',
    );
    expectError(
      await api('GET', `/drafts?account_id=${a.id}&limit=1&cursor=${first.cursor}`),
      400,
      'invalid_parameters',
    );
  });
});

describe('GET /drafts', () => {
  it('lists drafts only, as Draft items with a draft_id, per account', async () => {
    const a = await readAccount();
    const b = await readAccount();
    await a.deliver('Drafts', { subject: 'draft a1', date: minute(1) }, { subject: 'draft a2', date: minute(2) });
    await a.deliver('INBOX', { subject: 'not a draft' });
    await b.deliver('Drafts', { subject: 'draft b' });
    const res = await api('GET', `/drafts?account_id=${a.id}`);
    expect(res.status).toBe(200);
    expect(res.body.object).toBe('Drafts');
    expect(subjects(res.body)).toEqual(['draft a2', 'draft a1']);
    for (const d of res.body.data) {
      expect(d.object).toBe('Draft');
      expect(d.draft_id).toMatch(/^drf_[0-9A-Z]{26}$/);
      expect(d.role).toBe('DRAFTS');
    }
    const paged = await api('GET', `/drafts?account_id=${a.id}&limit=1`);
    const next = await api('GET', `/drafts?account_id=${a.id}&limit=1&cursor=${paged.body.cursor}`);
    expect([...subjects(paged.body), ...subjects(next.body)]).toEqual(['draft a2', 'draft a1']);
    expect(next.body).toMatchObject({ has_more: false, cursor: null });
    expect((await api('GET', '/drafts?account_id=acc_nope')).body.data).toEqual([]);
    // Drafts also appear in the emails list, with role DRAFTS.
    expect(sorted(await listEmails(`account_id=${a.id}&role=DRAFTS`))).toEqual(['draft a1', 'draft a2']);
  });
});

describe('the list variant', () => {
  it('has exactly the fields the spec lists', async () => {
    const a = await readAccount();
    const root = '<variant-root@example.test>';
    await a.deliver('INBOX', { subject: 'root', messageId: root });
    await a.deliver('INBOX', {
      subject: 'Re: root',
      inReplyTo: root,
      references: root,
      attachment: { name: 'x.txt', type: 'text/plain', content: 'x' },
    });
    const [email] = (await listEmails(`account_id=${a.id}&subject=Re:`)).data;
    const rootId = (await listEmails(`account_id=${a.id}`)).data.find((e: any) => e.subject === 'root').id;
    expect(Object.keys(email).sort()).toEqual(
      [
        ...EMAIL_FIELDS,
        'origin',
        'tracking_id',
        'provider_id',
        'message_id',
        'snippet',
        'in_reply_to',
        'references',
        'folder_ids',
        'role',
        'unread',
        'starred',
        'size',
      ].sort(),
    );
    expect(email).toMatchObject({
      object: 'Email',
      in_reply_to: { message_id: root, id: rootId },
      references: [root],
      has_attachments: true,
    });
    expect(email.from_attendee).toEqual({ identifier: 'bob@example.test', display_name: 'Bob Sender' });
    expect(email.folders).toEqual(email.folder_ids);
  });
});
