// Removing an account erases it: from the moment DELETE answers no read path shows its mail (the
// events feed, an event by id, the webhook conversations included), and once the purge is over no
// row of it is left in any D1 table and no object under its R2 prefixes; the account.remove event
// is all that remains.
import { runDurableObjectAlarm } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { purgeStep } from '../../worker/accounts/purge.ts';
import { eventStatement, eventStatementIfLive, newEvent } from '../../worker/events/outbox.ts';
import { requestHash } from '../../worker/send/idempotency.ts';
import { deliveryOptions } from '../../worker/webhooks/schedule.ts';
import { api, countIn, NUMBERED_ROWS_OF_ACCOUNT } from './helpers.ts';
import { accountShard, DIRECTORY_SHARD, shards } from '../../worker/shards/registry.ts';
import { accountEnv } from '../../worker/shards/spread.ts';
import { createSyncedAccount, leased, messageIn, rawMessage } from './sync-helpers.ts';
import { consume, createEndpoint, recordingEnv, subscriber } from './webhook-helpers.ts';

/** The `shard` field of the account's webhook queue messages (none for DB). */
const shardOf = async (accountId: string) => {
  const { name } = await accountShard(env, accountId);
  return name === DIRECTORY_SHARD ? {} : { shard: name };
};

/**
 * Rows that belong to the account, table by table (every table of the schema that can hold one),
 * asked of every mail shard: the directory and the account's shard alike.
 */
const ROWS_OF_ACCOUNT: Record<string, string> = {
  accounts: 'SELECT COUNT(*) AS n FROM accounts WHERE id = ?1',
  folders: 'SELECT COUNT(*) AS n FROM folders WHERE account_id = ?1',
  emails: 'SELECT COUNT(*) AS n FROM emails WHERE account_id = ?1',
  email_folders: 'SELECT COUNT(*) AS n FROM email_folders WHERE account_id = ?1',
  email_participants: 'SELECT COUNT(*) AS n FROM email_participants WHERE account_id = ?1',
  attachments: 'SELECT COUNT(*) AS n FROM attachments WHERE account_id = ?1',
  contacts: 'SELECT COUNT(*) AS n FROM contacts WHERE account_id = ?1',
  thread_keys: 'SELECT COUNT(*) AS n FROM thread_keys WHERE account_id = ?1',
  email_search: 'SELECT COUNT(*) AS n FROM email_search WHERE account_id = ?1',
  outgoing_messages: 'SELECT COUNT(*) AS n FROM outgoing_messages WHERE account_id = ?1',
  idempotency_keys: 'SELECT COUNT(*) AS n FROM idempotency_keys WHERE account_id = ?1',
  tracking_hits: "SELECT COUNT(*) AS n FROM tracking_hits WHERE tracking_id = 'trk_erasure' AND ?1 IS NOT NULL",
  events: "SELECT COUNT(*) AS n FROM events WHERE account_id = ?1 AND type != 'account.remove'",
  webhook_conversations:
    'SELECT COUNT(*) AS n FROM webhook_conversations WHERE event_id NOT IN (SELECT id FROM events) AND ?1 IS NOT NULL',
  ...NUMBERED_ROWS_OF_ACCOUNT,
};

describe('removing an account', () => {
  it('hides its events and deliveries at once, and the purge leaves nothing of it but account.remove', {
    timeout: 120_000,
  }, async () => {
    const { id, stub, db } = await leased();
    const shard = await shardOf(id);
    const endpoint = await createEndpoint({ trigger_events: ['email.new'] });
    const messages = Array.from({ length: 20 }, (_, k) =>
      messageIn(k + 1, rawMessage({ subject: `erase me ${k}`, from: `friend${k}@remote.test` })),
    );
    await stub.applyChanges('gw-1', [{ type: 'messages', path: 'INBOX', uidvalidity: 1, messages }]);
    const { results: events } = await db
      .prepare("SELECT id FROM events WHERE account_id = ? AND type = 'email.new'")
      .bind(id)
      .all<{ id: string }>();
    expect(events).toHaveLength(20);
    // Their deliveries: fanned out, the calls failed, so they wait for a retry.
    const { env: testEnv } = recordingEnv();
    const sub = subscriber(500);
    await consume(
      testEnv,
      deliveryOptions({ fetch: sub.fetch, timeoutMs: 5_000 }),
      events.map((e) => ({ kind: 'event' as const, event_id: e.id, ...shard })),
    );
    expect(sub.calls).toHaveLength(20);
    // What a send leaves: its record, its stored idempotent answer, tracking hits, a composed message.
    // The key lives in the directory, the record and the hits in the account's shard.
    await db.batch([
      db
        .prepare(
          `INSERT INTO outgoing_messages (account_id, message_id, kind, tracking_id, created_at, outcome)
           VALUES (?, '<sent@erasure>', 'send', 'trk_erasure', '2026-01-01T00:00:00Z', 'sent')`,
        )
        .bind(id),
      db
        .prepare(
          "INSERT INTO tracking_hits (tracking_id, key, window_start_ms, count) VALUES ('trk_erasure', 'open', ?, 1)",
        )
        .bind(Date.now()),
    ]);
    await env.DB.prepare(
      `INSERT INTO idempotency_keys (key, scope, request_hash, status, created_at, expires_at, account_id, message_id, response_json)
       VALUES ('erase-key', 'POST /emails', 'h', 'completed', ?1, ?1 + 86400000, ?2, '<sent@erasure>', '{"subject":"erase me"}')`,
    )
      .bind(Date.now(), id)
      .run();
    await env.BLOBS.put(`outgoing/${id}/leftover.json`, '{}');

    for (const [table, sql] of Object.entries(NUMBERED_ROWS_OF_ACCOUNT))
      expect(await countIn(db, sql, id), `before: ${table}`).toBeGreaterThan(0);
    const removed = await api('DELETE', `/accounts/${id}`);
    expect(removed.status).toBe(200);

    // At once: nothing of it in the feed, by id, or in the endpoint's conversations.
    expect((await api('GET', `/events?account_id=${id}`)).body.data).toEqual([]);
    const feed = (await api('GET', '/events?limit=100')).body.data as { account_id: string | null }[];
    expect(feed.filter((e) => e.account_id === id)).toEqual([]);
    for (const e of events.slice(0, 3)) expect((await api('GET', `/events/${e.id}`)).status).toBe(404);
    const listed = await api('GET', `/webhooks/conversations?endpoint_id=${endpoint.id}`);
    expect(listed.status).toBe(200);
    expect(listed.body.data).toEqual([]);

    // Its waiting deliveries are never made: a retry pass makes no call.
    await consume(
      testEnv,
      deliveryOptions({ fetch: sub.fetch, timeoutMs: 5_000, now: () => Date.now() + 3_600_000 }),
      (
        await db
          .prepare('SELECT id FROM webhook_conversations WHERE endpoint_id = ?')
          .bind(endpoint.id)
          .all<{ id: string }>()
      ).results.map((c) => ({ kind: 'delivery' as const, conversation_id: c.id, ...shard })),
    );
    expect(sub.calls).toHaveLength(20);

    // The purge, alarm by alarm.
    for (let runs = 0; runs < 100 && (await runDurableObjectAlarm(stub)); runs++);
    for (const { name, db: shardDb } of shards(env))
      for (const [table, sql] of Object.entries(ROWS_OF_ACCOUNT))
        expect(await countIn(shardDb, sql, id), `${name}: ${table}`).toBe(0);
    for (const prefix of [`accounts/${id}/`, `outgoing/${id}/`])
      expect((await env.BLOBS.list({ prefix })).objects, prefix).toEqual([]);
    const left = await env.DB.prepare('SELECT type FROM events WHERE account_id = ?').bind(id).all<{ type: string }>();
    expect(left.results).toEqual([{ type: 'account.remove' }]);
    expect((await api('GET', `/events?account_id=${id}`)).body.data.map((e: { type: string }) => e.type)).toEqual([
      'account.remove',
    ]);
  });
});

describe('events of an account whose row is gone', () => {
  it('are not shown in the feed, by id, or made by a late tracking hit', async () => {
    const { id, db } = await createSyncedAccount();
    const event = newEvent('email.new', id, { email_id: 'eml_x' });
    await eventStatement(db, event).run();
    const visible = async () => {
      const feed = await api('GET', `/events?account_id=${id}`);
      expect(feed.status).toBe(200);
      return (feed.body as { data: { id: string }[] }).data.map((e) => e.id);
    };
    expect(await visible()).toEqual([event.id]);
    // A removal whose purge already deleted the account's row (and raced this event's write).
    // (Its mark in its shard first, then the directory's row, as the purge deletes them.)
    for (const gone of new Set([db, env.DB])) await gone.prepare('DELETE FROM accounts WHERE id = ?').bind(id).run();
    expect(await visible()).toEqual([]);
    expect((await api('GET', `/events/${event.id}`)).status).toBe(404);
    const late = newEvent('tracking.open', id, {});
    const made = await eventStatementIfLive(db, { ...late, account_id: id }).run();
    expect(made.meta.changes).toBe(0);
  });
});

describe('an Idempotency-Key of a removed account', () => {
  it('no longer replays the stored answer: the account is unknown', async () => {
    const { id } = await createSyncedAccount();
    const body = { account_id: id, to: [{ identifier: 'bob@example.test' }], subject: 'x' };
    const stored = { object: 'EmailSent', account_id: id, message_id: '<gone@example.test>' };
    const now = Date.now();
    await env.DB.prepare(
      `INSERT INTO idempotency_keys (key, scope, request_hash, status, response_code, response_json, account_id, message_id, created_at, expires_at)
       VALUES ('removed-1', 'POST /emails', ?, 'completed', 200, ?, ?, '<gone@example.test>', ?, ?)`,
    )
      .bind(await requestHash(body), JSON.stringify(stored), id, now, now + 86_400_000)
      .run();
    const replay = () => api('POST', '/emails', { body, headers: { 'Idempotency-Key': 'removed-1' } });
    expect((await replay()).body).toEqual(stored);
    await env.DB.prepare('UPDATE accounts SET removed_at_ms = ? WHERE id = ?').bind(now, id).run();
    const after = await replay();
    expect(after.status).toBe(404);
    expect((after.body as { type: string }).type).toBe('errors/not_found');
  });
});

describe('the purge of an event delivered to many endpoints', () => {
  it('deletes its deliveries a chunk of rows at a time, and the event once none is left', async () => {
    const { id, db } = await createSyncedAccount();
    const event = newEvent('email.new', id, { email_id: 'eml_x' });
    await eventStatement(db, event).run();
    await db
      .prepare(
        `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1500)
       INSERT INTO webhook_conversations (id, endpoint_id, event_id, event_type, created_at, updated_at)
       SELECT 'whc_' || i, 'we_' || i, ?, 'email.new', 'now', 'now' FROM n`,
      )
      .bind(event.id)
      .run();
    const left = async () => ({
      deliveries: await countIn(db, 'SELECT COUNT(*) AS n FROM webhook_conversations WHERE event_id = ?', event.id),
      events: await countIn(db, 'SELECT COUNT(*) AS n FROM events WHERE id = ?', event.id),
    });
    // The purge runs in the account's object, whose env.DB is the account's shard.
    const view = await accountEnv(env, id);
    expect(await purgeStep(view, id)).toBe(false);
    expect(await left()).toEqual({ deliveries: 500, events: 1 });
    await purgeStep(view, id);
    expect(await left()).toEqual({ deliveries: 0, events: 0 });
  });
});
