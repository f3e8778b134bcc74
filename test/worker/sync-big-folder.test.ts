// A folder of 100,000 messages, as a gateway without CONDSTORE or QRESYNC reports it: the flags of
// every message at each session's first pass, a change of every message's flags, and a snapshot with
// expunges, each in pieces of MAX_CHANGE_UIDS (gateway/pass-tail.ts) applied by the account's object
// one invocation each, counted against Cloudflare's limits (test/worker/metered.ts): D1 queries,
// subrequests, bound parameters per statement and bytes per bound value.
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { MAX_CHANGE_UIDS } from '../../common/relay-limits.ts';
import type { Change } from '../../common/relay.ts';
import { snapshotPieces } from '../../common/relay-pieces.ts';
import { drainAlarms, invocation, LIMITS, meterObject, newMeter, type Meter } from './metered.ts';
import { createSyncedAccount, messageIn, rawMessage, STANDARD_FOLDERS } from './sync-helpers.ts';

const TOTAL = 100_000;

/** A count in `db`, the account's mail database. */
const countOf = async (db: D1Database, sql: string, ...params: unknown[]) =>
  (await db
    .prepare(sql)
    .bind(...params)
    .first<{ n: number }>())!.n;

/** An account whose Archive holds TOTAL synced messages (UIDs 1…TOTAL), all unread. */
async function bigArchive() {
  const account = await createSyncedAccount();
  const { db } = account;
  expect((await account.stub.acquireLease('gw-1')).granted).toBe(true);
  await account.stub.applyChanges('gw-1', [
    { type: 'messages', path: 'Archive', uidvalidity: 1, messages: [messageIn(1, rawMessage({ subject: 'big 1' }))] },
  ]);
  const seed = await db.prepare('SELECT id FROM emails WHERE account_id = ?').bind(account.id).first<{ id: string }>();
  // The other messages are copies of the first row, written straight into D1 (syncing them one by
  // one is what test/worker/sync-limits.test.ts measures).
  const { results: columns } = await db.prepare("SELECT name FROM pragma_table_info('emails')").all<{
    name: string;
  }>();
  const names = columns.map((c) => c.name);
  // Ids of their own per call: the tests of this file share one database.
  const prefix = `email_big${crypto.randomUUID().slice(0, 8)}_`;
  const value = (name: string) =>
    name === 'id'
      ? `'${prefix}' || printf('%06d', n.i)`
      : name === 'identity'
        ? "identity || '#big' || n.i"
        : name === 'message_id'
          ? "'<big-' || n.i || '@remote.test>'"
          : name === 'num'
            ? 'num + n.i' // above the seed's, the highest number in use
            : name;
  await db
    .prepare(
      `WITH RECURSIVE n(i) AS (SELECT 2 UNION ALL SELECT i + 1 FROM n WHERE i < ${TOTAL})
     INSERT INTO emails (${names.join(', ')}) SELECT ${names.map(value).join(', ')} FROM emails, n WHERE emails.id = ?`,
    )
    .bind(seed!.id)
    .run();
  await db
    .prepare(
      `WITH RECURSIVE n(i) AS (SELECT 2 UNION ALL SELECT i + 1 FROM n WHERE i < ${TOTAL})
     INSERT INTO email_folders (email_id, folder_id, account_id, uid, seen, flagged)
     SELECT '${prefix}' || printf('%06d', n.i), folder_id, account_id, n.i, seen, flagged FROM email_folders, n WHERE email_id = ?`,
    )
    .bind(seed!.id)
    .run();
  await account.stub.applyChanges('gw-1', [
    { type: 'cursor', path: 'Archive', uidvalidity: 1, last_uid: TOTAL, highest_modseq: null },
  ]);
  const meter = newMeter();
  await meterObject(account.stub, env, meter);
  return { ...account, meter };
}

/** Applies each piece as the gateway sends it, a batch (one invocation of the object) each. */
async function applyPieces(meter: Meter, stub: Awaited<ReturnType<typeof bigArchive>>['stub'], pieces: Change[]) {
  for (const piece of pieces)
    await invocation(meter, async () => {
      const applied = await stub.applyChanges('gw-1', [piece]);
      expect(applied.ok).toBe(true);
    });
}

function withinLimits(meter: Meter, what: string): void {
  console.log(
    `${what}: ${meter.invocations} invocations, at most ${meter.max.d1} D1 queries and ${meter.max.subrequests} subrequests in one, ` +
      `at most ${meter.bound.params} parameters and ${meter.bound.valueBytes} bytes bound to one statement`,
  );
  expect(meter.max.d1, `${what}: metered no D1 query (is the account's shard metered?)`).toBeGreaterThan(0);
  expect(meter.max.d1).toBeLessThanOrEqual(LIMITS.d1);
  expect(meter.max.subrequests).toBeLessThanOrEqual(LIMITS.subrequests);
  expect(meter.bound.params).toBeLessThanOrEqual(LIMITS.params);
  expect(meter.bound.valueBytes).toBeLessThanOrEqual(LIMITS.valueBytes);
}

const uids = Array.from({ length: TOTAL }, (_, k) => k + 1);
const flagPieces = (flags: string[]): Change[] => {
  const pieces: Change[] = [];
  for (let i = 0; i < TOTAL; i += MAX_CHANGE_UIDS)
    pieces.push({
      type: 'flags',
      path: 'Archive',
      uidvalidity: 1,
      updates: uids.slice(i, i + MAX_CHANGE_UIDS).map((uid) => ({ uid, flags })),
    });
  return pieces;
};

describe('a folder of 100,000 messages without CONDSTORE or QRESYNC', () => {
  it('re-reads every flag, marks every message read, and finds expunges by snapshot, each piece within one invocation', async () => {
    const { id, stub, meter, db } = await bigArchive();
    expect(await countOf(db, 'SELECT COUNT(*) AS n FROM email_folders WHERE account_id = ?', id)).toBe(TOTAL);

    // A session's first pass without CONDSTORE: the flags of every message, none changed.
    await applyPieces(meter, stub, flagPieces([]));
    withinLimits(meter, 'unchanged flags of 100,000 messages');
    expect(
      await countOf(db, "SELECT COUNT(*) AS n FROM events WHERE account_id = ? AND type = 'email.update'", id),
    ).toBe(0);

    // Another client marks everything read: every email changes, one email.update each.
    await applyPieces(meter, stub, flagPieces(['\\Seen']));
    withinLimits(meter, 'every message of 100,000 marked read');
    expect(await countOf(db, 'SELECT COUNT(*) AS n FROM emails WHERE account_id = ? AND unread = 1', id)).toBe(0);
    expect(
      await countOf(db, "SELECT COUNT(*) AS n FROM events WHERE account_id = ? AND type = 'email.update'", id),
    ).toBe(TOTAL);

    // Every tenth message expunged, found by a snapshot in pieces.
    const kept = uids.filter((uid) => uid % 10 !== 0);
    await applyPieces(meter, stub, snapshotPieces('Archive', 1, kept, TOTAL));
    withinLimits(meter, 'a snapshot of 100,000 messages with 10,000 expunged');
    expect(await countOf(db, 'SELECT COUNT(*) AS n FROM email_folders WHERE account_id = ?', id)).toBe(kept.length);
    expect(
      await countOf(db, 'SELECT COUNT(*) AS n FROM emails WHERE account_id = ? AND orphaned_at_ms IS NOT NULL', id),
    ).toBe(TOTAL - kept.length);
  }, 600_000);
});

describe('a folder of 100,000 messages that are all also in the inbox (a Gmail label)', () => {
  it('leaves in one small batch when the server deletes it; its emails are refreshed in bounded steps, one email.update each', async () => {
    const { id, stub, meter, db } = await bigArchive();
    const folderId = async (path: string) =>
      (await db
        .prepare('SELECT id FROM folders WHERE account_id = ? AND provider_id = ?')
        .bind(id, path)
        .first<{ id: string }>())!.id;
    const [inbox, archive] = [await folderId('INBOX'), await folderId('Archive')];
    // Every message is also in the inbox; the label carries the star (Gmail keeps one flag set per
    // message, a server without labels one per copy: either way the star leaves with the folder).
    await db.batch([
      db
        .prepare(
          `INSERT INTO email_folders (email_id, folder_id, account_id, uid, seen, flagged)
         SELECT email_id, ?1, account_id, uid, seen, 0 FROM email_folders WHERE folder_id = ?2`,
        )
        .bind(inbox, archive),
      db.prepare('UPDATE email_folders SET flagged = 1 WHERE folder_id = ?').bind(archive),
      db.prepare("UPDATE emails SET starred = 1, role = 'ARCHIVE' WHERE account_id = ?").bind(id),
    ]);
    const updates = () =>
      countOf(db, "SELECT COUNT(*) AS n FROM events WHERE account_id = ? AND type = 'email.update'", id);

    // Two listings without Archive: the second deletes it.
    const listing: Change = {
      type: 'folders',
      folders: STANDARD_FOLDERS().filter((f) => f.path !== 'Archive'),
    };
    await applyPieces(meter, stub, [listing, listing]);
    withinLimits(meter, 'a folder of 100,000 deleted');
    expect(await countOf(db, 'SELECT COUNT(*) AS n FROM folders WHERE id = ?', archive)).toBe(0);
    expect(await countOf(db, 'SELECT COUNT(*) AS n FROM email_folders WHERE folder_id = ?', archive)).toBe(0);
    expect(
      await countOf(db, "SELECT COUNT(*) AS n FROM events WHERE account_id = ? AND type = 'email.folder.delete'", id),
    ).toBe(1);
    expect(await countOf(db, 'SELECT COUNT(*) AS n FROM folder_departures WHERE account_id = ?', id)).toBe(TOTAL);

    // The alarm refreshes them, one invocation per step; nothing is left an orphan.
    const steps = await drainAlarms(stub, meter, 1_000);
    withinLimits(meter, 'the refresh of 100,000 emails that left a folder');
    console.log(`refresh of 100,000 departures: ${steps} alarm steps`);
    expect(await countOf(db, 'SELECT COUNT(*) AS n FROM folder_departures WHERE account_id = ?', id)).toBe(0);
    expect(await updates()).toBe(TOTAL);
    expect(
      await countOf(
        db,
        "SELECT COUNT(*) AS n FROM emails WHERE account_id = ? AND starred = 0 AND role = 'INBOX' AND orphaned_at_ms IS NULL",
        id,
      ),
    ).toBe(TOTAL);
    const sample = await db
      .prepare("SELECT data_json FROM events WHERE account_id = ? AND type = 'email.update' ORDER BY seq DESC LIMIT 1")
      .bind(id)
      .first<{ data_json: string }>();
    expect(JSON.parse(sample!.data_json).folder_ids).toEqual([inbox]);
  }, 900_000);
});
