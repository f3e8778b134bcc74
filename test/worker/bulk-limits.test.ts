// Bulk work within one invocation's limits: emptying a Trash of 5,000 messages and removing an
// account of 20,000 emails run in bounded steps (alarms), each counted against Cloudflare's
// per-invocation limits (test/worker/metered.ts), and every purge statement is led by an index.
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { MAX_BATCH_MESSAGES } from '../../common/relay-limits.ts';
import { PURGE_ACCOUNT_ROWS_SQL, PURGE_DIRECTORY_ROWS_SQL, PURGE_EMAIL_IDS_SQL } from '../../worker/accounts/purge.ts';
import { REMOVED_ACCOUNTS } from '../../worker/accounts/removed.ts';
import { COUNT_DOWN_SQL } from '../../worker/contacts/counts.ts';
import { DELETE_EMAIL_ROWS_SQL } from '../../worker/emails/delete.ts';
import { api, NUMBERED_ROWS_OF_ACCOUNT } from './helpers.ts';
import { drainAlarms, invocation, LIMITS, meterObject, newMeter } from './metered.ts';
import { createSyncedAccount, messageIn, rawMessage } from './sync-helpers.ts';

async function leasedAccount() {
  const account = await createSyncedAccount();
  expect((await account.stub.acquireLease('gw-1')).granted).toBe(true);
  return account;
}

/** A count in `db`: the account's mail database, or the directory (env.DB) for its row and account.* events. */
const countOf = async (db: D1Database, sql: string, ...params: unknown[]) =>
  (await db
    .prepare(sql)
    .bind(...params)
    .first<{ n: number }>())!.n;

/** Copies every row of the account's emails (and what hangs off them) `times` times, with new ids. */
async function cloneEmails(db: D1Database, accountId: string, times: number): Promise<void> {
  const { results } = await db
    .prepare('SELECT id FROM emails WHERE account_id = ?')
    .bind(accountId)
    .all<{ id: string }>();
  const originals = JSON.stringify(results.map((r) => r.id));
  const byId = (key: string) => `${key} IN (SELECT value FROM json_each(?))`;
  /** Copies the rows `where` picks (? is the originals' ids). */
  const copy = async (table: string, where: string, changed: Record<string, string>) => {
    const { results: info } = await db.prepare(`SELECT name FROM pragma_table_info('${table}')`).all<{
      name: string;
    }>();
    const cols = info.map((r) => r.name);
    const select = cols.map((c) => changed[c] ?? c).join(', ');
    await db
      .prepare(
        `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${times})
       INSERT INTO ${table} (${cols.join(', ')}) SELECT ${select} FROM n, ${table}
       WHERE ${where}`,
      )
      .bind(originals)
      .run();
  };
  const suffix = (column: string) => `${column} || '-' || i`;
  // Numbers far above the originals' (the first few thousand) for every copy.
  const renumbered = 'num + i * 1000000';
  await copy('emails', byId('id'), { id: suffix('id'), identity: suffix('identity'), num: renumbered });
  const byNumber = `num IN (SELECT num FROM emails WHERE ${byId('id')})`;
  await copy('participants', byNumber, { num: renumbered });
  await copy('thread_key_numbers', byNumber, { num: renumbered });
  await copy('email_folders', byId('email_id'), { email_id: suffix('email_id'), uid: 'uid + i * 1000' });
  await copy('email_participants', byId('email_id'), { email_id: suffix('email_id') });
  await copy('thread_keys', byId('email_id'), { email_id: suffix('email_id') });
  await copy('email_search', byId('email_id'), { email_id: suffix('email_id'), rowid: 'NULL' });
  await copy('attachments', byId('email_id'), { id: suffix('id'), email_id: suffix('email_id') });
}

describe('emptying a Trash of 5,000 messages', () => {
  it('syncs them, detaches them and deletes them in alarms, no invocation over the limits', {
    timeout: 240_000,
  }, async () => {
    const { id, stub, db } = await leasedAccount();
    const meter = newMeter();
    await meterObject(stub, env, meter);
    const total = 5000;
    for (let first = 1; first <= total; first += MAX_BATCH_MESSAGES) {
      const messages = Array.from({ length: MAX_BATCH_MESSAGES }, (_, k) =>
        messageIn(
          first + k,
          rawMessage({ subject: `trash ${first + k}`, from: `sender${(first + k) % 40}@remote.test` }),
        ),
      );
      await invocation(meter, async () => {
        await stub.applyChanges('gw-1', [{ type: 'messages', path: 'Trash', uidvalidity: 1, messages }]);
      });
    }
    expect(await countOf(db, 'SELECT COUNT(*) AS n FROM emails WHERE account_id = ?', id)).toBe(total);

    // Empty Trash: one expunge of every UID, then the orphans go once every folder was read since.
    const uids = Array.from({ length: total }, (_, k) => k + 1);
    await invocation(meter, async () => {
      await stub.applyChanges('gw-1', [{ type: 'vanished', path: 'Trash', uidvalidity: 1, uids }]);
    });
    const { mark } = await stub.orphanState();
    const folders = (await stub.cursors()).map((c) => ({ path: c.path, uidvalidity: c.uidvalidity, started: mark }));
    await invocation(meter, async () => {
      await stub.applyChanges('gw-1', [{ type: 'passed', listed: mark, folders }]);
    });
    const alarms = await drainAlarms(stub, meter);

    expect(await countOf(db, 'SELECT COUNT(*) AS n FROM emails WHERE account_id = ?', id)).toBe(0);
    expect(
      await countOf(db, "SELECT COUNT(*) AS n FROM events WHERE account_id = ? AND type = 'email.delete'", id),
    ).toBe(total);
    expect(await countOf(db, 'SELECT COUNT(*) AS n FROM contacts WHERE account_id = ?', id)).toBe(0);
    expect((await env.BLOBS.list({ prefix: `accounts/${id}/` })).objects).toEqual([]);
    console.log(
      `Trash of ${total}: ${meter.invocations} invocations (${alarms} alarms); most in one: ${meter.max.d1} D1 queries, ${meter.max.subrequests} subrequests`,
    );
    expect(alarms).toBeGreaterThan(1);
    expect(meter.max.d1).toBeGreaterThan(0);
    expect(meter.max.d1).toBeLessThanOrEqual(LIMITS.d1);
    expect(meter.max.subrequests).toBeLessThanOrEqual(LIMITS.subrequests);
  });
});

describe('removing an account with 20,000 emails', () => {
  it('answers at once, hides the account at once, purges in alarms within the limits, then account.remove', {
    timeout: 240_000,
  }, async () => {
    const { id, stub, db } = await leasedAccount();
    const messages = Array.from({ length: 20 }, (_, k) =>
      messageIn(
        k + 1,
        rawMessage({
          subject: `keep ${k}`,
          from: `friend${k}@remote.test`,
          ...(k % 2 === 0 && { attachment: { name: 'report.pdf', type: 'application/pdf', content: `pdf ${k}` } }),
        }),
      ),
    );
    await stub.applyChanges('gw-1', [{ type: 'messages', path: 'INBOX', uidvalidity: 1, messages }]);
    await cloneEmails(db, id, 999);
    expect(await countOf(db, 'SELECT COUNT(*) AS n FROM emails WHERE account_id = ?', id)).toBe(20_000);
    expect(
      await countOf(
        db,
        'SELECT COUNT(*) AS n FROM attachments WHERE email_id IN (SELECT id FROM emails WHERE account_id = ?)',
        id,
      ),
    ).toBe(10_000);
    // More R2 objects than one listing page holds.
    for (let k = 0; k < 2500; k += 250)
      await Promise.all(
        Array.from({ length: 250 }, (_, j) => env.BLOBS.put(`accounts/${id}/raw/filler-${k + j}.eml`, 'x')),
      );

    const meter = newMeter();
    await meterObject(stub, env, meter);
    const removed = await api('DELETE', `/accounts/${id}`);
    expect(removed.status).toBe(200);
    expect(removed.body).toEqual({ object: 'AccountDeleted', id });

    // Gone from the API at once, though its rows are still being purged.
    expect((await api('GET', `/accounts/${id}`)).status).toBe(404);
    expect((await api('GET', '/accounts')).body.data.map((a: { id: string }) => a.id)).not.toContain(id);
    expect((await api('GET', `/emails?account_id=${id}`)).body.data).toEqual([]);
    expect(
      (await api('GET', '/emails?limit=250')).body.data.filter((e: { account_id: string }) => e.account_id === id),
    ).toEqual([]);
    expect((await api('GET', `/folders?account_id=${id}`)).body.data).toEqual([]);
    expect(await countOf(db, 'SELECT COUNT(*) AS n FROM emails WHERE account_id = ?', id)).toBeGreaterThan(0);
    expect(
      await countOf(env.DB, "SELECT COUNT(*) AS n FROM events WHERE account_id = ? AND type = 'account.remove'", id),
    ).toBe(0);

    const alarms = await drainAlarms(stub, meter);
    for (const table of [
      'emails',
      'email_participants',
      'email_folders',
      'thread_keys',
      'email_search',
      'contacts',
      'folders',
    ])
      expect(await countOf(db, `SELECT COUNT(*) AS n FROM ${table} WHERE account_id = ?`, id), table).toBe(0);
    for (const [table, sql] of Object.entries(NUMBERED_ROWS_OF_ACCOUNT))
      expect(await countOf(db, sql, id), table).toBe(0);
    expect(
      await countOf(
        db,
        'SELECT COUNT(*) AS n FROM attachments a WHERE NOT EXISTS (SELECT 1 FROM emails e WHERE e.id = a.email_id)',
      ),
    ).toBe(0);
    expect(await countOf(env.DB, 'SELECT COUNT(*) AS n FROM accounts WHERE id = ?', id)).toBe(0);
    expect(await countOf(db, 'SELECT COUNT(*) AS n FROM accounts WHERE id = ?', id)).toBe(0);
    expect((await env.BLOBS.list({ prefix: `accounts/${id}/` })).objects).toEqual([]);
    expect(
      await countOf(env.DB, "SELECT COUNT(*) AS n FROM events WHERE account_id = ? AND type = 'account.remove'", id),
    ).toBe(1);
    console.log(
      `removal of 20,000 emails: ${alarms} alarms; most in one: ${meter.max.d1} D1 queries, ${meter.max.subrequests} subrequests`,
    );
    expect(alarms).toBeGreaterThan(10);
    expect(meter.max.d1).toBeGreaterThan(0);
    expect(meter.max.d1).toBeLessThanOrEqual(LIMITS.d1);
    expect(meter.max.subrequests).toBeLessThanOrEqual(LIMITS.subrequests);
  });
});

describe('query plans of the purge statements', () => {
  const statements: [string, unknown[]][] = [
    [PURGE_EMAIL_IDS_SQL, ['acc_x']],
    ...PURGE_ACCOUNT_ROWS_SQL.map((sql): [string, unknown[]] => [sql, ['acc_x']]),
    ...PURGE_DIRECTORY_ROWS_SQL.map((sql): [string, unknown[]] => [sql, ['acc_x']]),
    ...DELETE_EMAIL_ROWS_SQL.map((sql): [string, unknown[]] => [sql, ['["email_x"]']]),
    [
      `SELECT * FROM emails WHERE account_id = ? AND orphaned_at_ms IS NOT NULL AND orphaned_at_ms <= ?
       AND NOT EXISTS (SELECT 1 FROM email_folders WHERE email_id = emails.id) LIMIT 200`,
      ['acc_x', 0],
    ],
    ...COUNT_DOWN_SQL.map((sql): [string, unknown[]] => [sql, ['["email_x"]', 'acc_x']]),
  ];
  it('every statement searches an index; none scans a table', async () => {
    for (const [sql, params] of statements) {
      const { results } = await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`)
        .bind(...params)
        .all<{ detail: string }>();
      const plan = results.map((r) => r.detail);
      // json_each is the bound list of ids itself; e is the emails listing, ordered by its own index;
      // the search index's plan `:=` is FTS5 looking up rowids (an index row's number); a subquery
      // is scanned as it yields the rows of its own searches.
      const scans = plan.filter(
        (d) =>
          /^SCAN /.test(d) &&
          !/^SCAN (json_each|e USING|emails_fts VIRTUAL TABLE INDEX \d+:=$|\(subquery-\d+\)$)/.test(d),
      );
      expect(scans, `${sql}\n${plan.join('\n')}`).toEqual([]);
    }
    // The accounts being removed: read from their partial index, which holds only them.
    const { results } = await env.DB.prepare(`EXPLAIN QUERY PLAN ${REMOVED_ACCOUNTS}`).all<{ detail: string }>();
    expect(results.map((r) => r.detail).join('\n')).toMatch(/USING (COVERING )?INDEX accounts_removed/);
  });
});
