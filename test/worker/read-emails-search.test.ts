// GET /emails?q=: full-text search over subjects, bodies and participants, FTS syntax taken as plain
// text, and the index following deleted emails and accounts.
import { runDurableObjectAlarm } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import { api } from './helpers.ts';
import { listEmails, minute, readAccount, subjects } from './read-helpers.ts';
import { readEveryFolder } from './sync-helpers.ts';

describe('GET /emails?q= full-text search', () => {
  it('finds by subject word, body word and participant, within an account, combinable', async () => {
    const a = await readAccount();
    const b = await readAccount();
    for (const acc of [a, b]) {
      await acc.deliver(
        'INBOX',
        { subject: 'Invoice for March', text: 'Please pay soon', date: minute(1) },
        { subject: 'Hello', text: 'The zeppelin lands at noon', date: minute(2) },
        {
          subject: 'Greetings',
          from: 'Zoe Quinn <zoe.quinn@example.test>',
          text: 'hi',
          date: minute(3),
          flags: ['\\Seen'],
        },
        { subject: 'Café plans', text: 'nothing here', date: minute(4) },
      );
    }
    const base = `account_id=${a.id}`;
    expect(subjects(await listEmails(`${base}&q=invoice`))).toEqual(['Invoice for March']);
    expect(subjects(await listEmails(`${base}&q=ZEPPELIN`))).toEqual(['Hello']);
    expect(subjects(await listEmails(`${base}&q=zoe.quinn@example.test`))).toEqual(['Greetings']);
    expect(subjects(await listEmails(`${base}&q=Quinn`))).toEqual(['Greetings']);
    expect(subjects(await listEmails(`${base}&q=cafe`))).toEqual(['Café plans']);
    // Every word is required.
    expect(subjects(await listEmails(`${base}&q=zeppelin%20noon`))).toEqual(['Hello']);
    expect((await listEmails(`${base}&q=zeppelin%20invoice`)).data).toEqual([]);
    // Combined with other filters, and across accounts.
    expect((await listEmails(`${base}&q=quinn&unread=true`)).data).toEqual([]);
    expect(subjects(await listEmails(`${base}&q=quinn&unread=false`))).toEqual(['Greetings']);
    const everywhere = (await listEmails(`q=zeppelin&limit=250`)).data.filter((e: any) =>
      [a.id, b.id].includes(e.account_id),
    );
    expect(everywhere.map((e: any) => e.account_id).sort()).toEqual([a.id, b.id].sort());
  });

  it('treats FTS syntax as text: never a 500', async () => {
    const a = await readAccount();
    await a.deliver('INBOX', { subject: 'AND then (some) "quotes"', text: 'star*dust NEAR col:on' });
    const base = `account_id=${a.id}`;
    for (const hostile of [
      '"',
      '*',
      'AND',
      '(',
      ')',
      'NOT',
      'OR',
      '"unbalanced',
      'a:b',
      '^x',
      'NEAR(',
      '-',
      '{x}',
      "'",
      '\\',
      '%',
      '""""',
      // Letters the index's tokenizer (Unicode 6.1 tables) does not know: inside a word they separate.
      'ab\u08a1cd',
      'x\u{1f600}y',
    ]) {
      const res = await api('GET', `/emails?${base}&q=${encodeURIComponent(hostile)}`);
      expect(res.status, `q=${hostile}`).toBe(200);
    }
    expect(subjects(await listEmails(`${base}&q=AND`))).toEqual(['AND then (some) "quotes"']);
    expect(subjects(await listEmails(`${base}&q=(some)`))).toEqual(['AND then (some) "quotes"']);
    expect(subjects(await listEmails(`${base}&q=${encodeURIComponent('"quotes"')}`))).toEqual([
      'AND then (some) "quotes"',
    ]);
    expect(subjects(await listEmails(`${base}&q=star*dust`))).toEqual(['AND then (some) "quotes"']);
    expect(subjects(await listEmails(`${base}&q=col:on`))).toEqual(['AND then (some) "quotes"']);
    // Only punctuation: nothing to search for, nothing found.
    expect((await listEmails(`${base}&q=${encodeURIComponent('* ( " -')}`)).data).toEqual([]);
  });

  it('forgets deleted emails: the index row goes with the email', async () => {
    const a = await readAccount();
    await a.deliver('INBOX', { subject: 'ephemeral xylophone' }, { subject: 'stays' });
    const indexed = () =>
      a.db
        .prepare('SELECT COUNT(*) AS n FROM emails_fts WHERE rowid IN (SELECT num FROM emails WHERE account_id = ?)')
        .bind(a.id)
        .first<{ n: number }>();
    expect((await indexed())?.n).toBe(2);
    expect(subjects(await listEmails(`account_id=${a.id}&q=xylophone`))).toEqual(['ephemeral xylophone']);
    const before = (await a.db.prepare('SELECT COUNT(*) AS n FROM emails_fts').first<{ n: number }>())!.n;
    await a.stub.applyChanges(a.gateway, [{ type: 'vanished', path: 'INBOX', uidvalidity: 1, uids: [1] }]);
    await readEveryFolder(a.stub);
    expect((await indexed())?.n).toBe(1);
    expect((await a.db.prepare('SELECT COUNT(*) AS n FROM emails_fts').first<{ n: number }>())!.n).toBe(before - 1);

    await api('DELETE', `/accounts/${a.id}`);
    while (await runDurableObjectAlarm(a.stub));
    expect((await indexed())?.n).toBe(0);
    expect((await a.db.prepare('SELECT COUNT(*) AS n FROM emails_fts').first<{ n: number }>())!.n).toBe(before - 2);
  });
});
