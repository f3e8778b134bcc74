// Emails stored before email numbers (migrations/0036_email_numbers.sql) keep their participant,
// threading-key and search rows by email id: filters, search, threading, contacts and deletion
// work on them and on numbered emails alike.
import { describe, expect, it } from 'vitest';
import { api, countIn, NUMBERED_ROWS_OF_ACCOUNT } from './helpers.ts';
import { listEmails, minute, readAccount, subjects } from './read-helpers.ts';
import { readEveryFolder } from './sync-helpers.ts';

/** An `email_search` rowid of an older database: numbers given after it start a million above it. */
const OLD_ROWID = 500;

/**
 * Rewrites a stored email into the form of before numbers, as a database migrated from then holds
 * it: rows by email id in `email_participants`, `thread_key_hashes` and `email_search` (with its
 * search index row under that rowid), and no number.
 */
async function storeAsBefore(
  db: D1Database,
  accountId: string,
  emailId: string,
  indexed: { subject: string; body: string; participants: string },
): Promise<void> {
  const num = '(SELECT num FROM emails WHERE id = ?1)';
  const statements: [string, unknown[]][] = [
    ['INSERT INTO email_search (rowid, email_id, account_id) VALUES (?3, ?1, ?2)', [emailId, accountId, OLD_ROWID]],
    [
      `INSERT INTO email_participants (email_id, account_id, kind, address)
       SELECT ?1, ?2, kind, address FROM participants WHERE num = ${num}`,
      [emailId, accountId],
    ],
    [
      `INSERT INTO thread_key_hashes (key_hash, email_id) SELECT key_hash, ?1 FROM thread_key_numbers WHERE num = ${num}`,
      [emailId],
    ],
    [`DELETE FROM participants WHERE num = ${num}`, [emailId]],
    [`DELETE FROM thread_key_numbers WHERE num = ${num}`, [emailId]],
    [`DELETE FROM emails_fts WHERE rowid = ${num}`, [emailId]],
    [
      'INSERT INTO emails_fts (rowid, subject, body, participants) VALUES (?, ?, ?, ?)',
      [OLD_ROWID, indexed.subject, indexed.body, indexed.participants],
    ],
    ['UPDATE emails SET num = NULL WHERE id = ?1', [emailId]],
  ];
  await db.batch(statements.map(([sql, params]) => db.prepare(sql).bind(...params)));
}

describe('emails stored before numbers', () => {
  it('are found by address and by word, thread with new mail, count as contacts and leave nothing when deleted', async () => {
    const a = await readAccount();
    const base = `account_id=${a.id}`;
    await a.deliver('INBOX', {
      subject: 'Quarterly zebra report',
      from: 'Olga Old <olga@old.test>',
      to: a.email,
      cc: 'carl@cc.test',
      date: minute(1),
      messageId: '<root@old.test>',
      text: 'The zebra numbers are in.',
    });
    const [old] = (await listEmails(base)).data;
    await storeAsBefore(a.db, a.id, old.id, {
      subject: old.subject,
      body: 'The zebra numbers are in.',
      participants: `Olga Old olga@old.test ${a.email} carl@cc.test`,
    });
    expect(await countIn(a.db, 'SELECT COUNT(*) AS n FROM emails WHERE num IS NOT NULL AND account_id = ?', a.id)).toBe(
      0,
    );

    // New mail: a reply to the old one, by its Message-ID, from the same person.
    await a.deliver('INBOX', {
      subject: 'Re: Quarterly zebra report',
      from: 'Olga Old <olga@old.test>',
      to: a.email,
      date: minute(2),
      inReplyTo: '<root@old.test>',
      references: '<root@old.test>',
      text: 'And the zebra totals.',
    });
    // Its number starts a million above the older rows' search rowids (an older Worker adding some stays below).
    expect(await countIn(a.db, 'SELECT MIN(num) AS n FROM emails WHERE account_id = ?', a.id)).toBe(
      OLD_ROWID + 1_000_001,
    );
    const listed = (await listEmails(base)).data;
    expect(subjects({ data: listed })).toEqual(['Re: Quarterly zebra report', 'Quarterly zebra report']);
    expect(listed[0].thread_id).toBe(old.thread_id);

    // Filters and search find both forms, once each, newest first.
    const both = ['Re: Quarterly zebra report', 'Quarterly zebra report'];
    expect(subjects(await listEmails(`${base}&any_email=olga@old.test`))).toEqual(both);
    expect(subjects(await listEmails('any_email=OLGA@old.test'))).toEqual(both);
    expect(subjects(await listEmails(`${base}&to=carl@cc.test`))).toEqual(['Quarterly zebra report']);
    expect(subjects(await listEmails(`${base}&q=zebra`))).toEqual(both);
    expect(subjects(await listEmails(`${base}&q=numbers`))).toEqual(['Quarterly zebra report']);
    expect(subjects(await listEmails(`${base}&q=totals`))).toEqual(['Re: Quarterly zebra report']);

    const olga = async () =>
      (await api('GET', `/contacts?account_id=${a.id}`)).body.data.find(
        (c: { identifier: string }) => c.identifier === 'olga@old.test',
      );
    expect((await olga()).emails_count).toBe(2);

    // Deleting the old one counts its contacts down and takes its rows in the older tables.
    await a.stub.applyChanges(a.gateway, [{ type: 'vanished', path: 'INBOX', uidvalidity: 1, uids: [1] }]);
    await readEveryFolder(a.stub);
    expect(subjects(await listEmails(base))).toEqual(['Re: Quarterly zebra report']);
    expect((await olga()).emails_count).toBe(1);
    expect((await olga()).last_email_at).toBe(new Date(Date.UTC(2026, 0, 1) + 2 * 60_000).toISOString());
    expect(
      (await api('GET', `/contacts?account_id=${a.id}`)).body.data.map((c: { identifier: string }) => c.identifier),
    ).not.toContain('carl@cc.test');
    for (const table of ['email_participants', 'thread_key_hashes', 'email_search'])
      expect(await countIn(a.db, `SELECT COUNT(*) AS n FROM ${table} WHERE email_id = ?`, old.id), table).toBe(0);
    expect(await countIn(a.db, 'SELECT COUNT(*) AS n FROM emails_fts WHERE rowid = ?', OLD_ROWID)).toBe(0);
    expect(subjects(await listEmails(`${base}&q=numbers`))).toEqual([]);

    // And the new one goes the same way, by its number.
    await a.stub.applyChanges(a.gateway, [{ type: 'vanished', path: 'INBOX', uidvalidity: 1, uids: [2] }]);
    await readEveryFolder(a.stub);
    expect((await listEmails(base)).data).toEqual([]);
    for (const [table, sql] of Object.entries(NUMBERED_ROWS_OF_ACCOUNT).filter(([t]) => t !== 'account_numbers'))
      expect(await countIn(a.db, sql, a.id), table).toBe(0);
    expect(await olga()).toBeUndefined();
  });
});
