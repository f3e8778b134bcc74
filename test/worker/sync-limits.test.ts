// The largest changes the gateway sends (MAX_BATCH_MESSAGES messages, or MAX_BATCH_BYTES of sources)
// applied in one invocation of the account's object, counted against Cloudflare's per-invocation
// limits (test/worker/metered.ts): new mail with threads, contacts and attachments, a move of as many
// messages, and their flags. New mail is written set-based: its D1 statements and R2 operations per
// message are counted too, and what was written is read back through the API (segments by byte range).
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { MAX_BATCH_BYTES, MAX_BATCH_MESSAGES } from '../../common/relay-limits.ts';
import type { Change, MessageIn } from '../../common/relay.ts';
import { api } from './helpers.ts';
import { invocation, LIMITS, meterObject, newMeter, type Meter } from './metered.ts';
import { accountDb, createSyncedAccount, messageIn, outbox, rawMessage } from './sync-helpers.ts';

async function leasedAccount() {
  const account = await createSyncedAccount();
  expect((await account.stub.acquireLease('gw-1')).granted).toBe(true);
  const meter = newMeter();
  await meterObject(account.stub, env, meter);
  return { ...account, meter };
}

/** One call of the account object's applyChanges, metered as one invocation. */
const applyIn = (meter: Meter, stub: Awaited<ReturnType<typeof createSyncedAccount>>['stub'], changes: Change[]) =>
  invocation(meter, async () => {
    await stub.applyChanges('gw-1', changes);
  });

/** A count in `db`, the account's mail database. */
const countOf = async (db: D1Database, sql: string, ...params: unknown[]) =>
  (await db
    .prepare(sql)
    .bind(...params)
    .first<{ n: number }>())!.n;

/** Messages `first`…: 60 senders, replies to earlier messages (threads), an attachment on every third. */
function mail(first: number, count: number, attachmentBytes = 64): { sources: string[]; messages: MessageIn[] } {
  const sources = Array.from({ length: count }, (_, k) => {
    const n = first + k;
    return rawMessage({
      subject: n % 4 === 0 ? `Re: topic ${n % 40}` : `topic ${n}`,
      from: `Sender ${n % 60} <sender${n % 60}@remote.test>`,
      cc: `Watcher <watcher${n % 7}@remote.test>`,
      messageId: `<limits-${n}@remote.test>`,
      ...(n > 3 && n % 2 === 1 && { inReplyTo: `<limits-${n - 3}@remote.test>` }),
      ...(n % 3 === 0 && {
        attachment: {
          name: `file-${n}.txt`,
          type: 'text/plain',
          content: `attachment ${n} `.repeat(attachmentBytes / 16),
        },
      }),
    });
  });
  return { sources, messages: sources.map((s, k) => messageIn(first + k, s)) };
}

function within(meter: Meter, what: string): void {
  console.log(`${what}: ${meter.d1} D1 queries, ${meter.subrequests} subrequests in one invocation`);
  expect(meter.d1, `${what}: metered no D1 query (is the account's shard metered?)`).toBeGreaterThan(0);
  expect(meter.d1).toBeLessThanOrEqual(LIMITS.d1);
  expect(meter.subrequests).toBeLessThanOrEqual(LIMITS.subrequests);
}

describe('the largest change, in one invocation', () => {
  it(`${MAX_BATCH_MESSAGES} new messages: within the limits, at most 1 D1 statement and far under 1 R2 operation per message`, {
    timeout: 120_000,
  }, async () => {
    const { id, stub, meter, db } = await leasedAccount();
    const apply = (messages: MessageIn[]) =>
      applyIn(meter, stub, [{ type: 'messages', path: 'INBOX', uidvalidity: 1, messages }]);
    const first = mail(1, MAX_BATCH_MESSAGES);
    await apply(first.messages);
    within(meter, `${MAX_BATCH_MESSAGES} new messages`);
    // The second change threads onto the first (stored keys) and counts up stored contacts.
    const second = mail(MAX_BATCH_MESSAGES + 1, MAX_BATCH_MESSAGES);
    await apply(second.messages);
    within(meter, `${MAX_BATCH_MESSAGES} more, threading onto stored mail`);
    expect(meter.d1 / MAX_BATCH_MESSAGES).toBeLessThanOrEqual(1);
    expect(meter.subrequests / MAX_BATCH_MESSAGES).toBeLessThan(0.1);

    const total = 2 * MAX_BATCH_MESSAGES;
    expect(await countOf(db, 'SELECT COUNT(*) AS n FROM emails WHERE account_id = ?', id)).toBe(total);
    // One email.new per message, in UID order.
    const news = (await outbox(id)).filter((e) => e.type === 'email.new');
    expect(news.map((e) => e.data.subject)).toEqual([...first.sources, ...second.sources].map(subjectOf));
    // A reply joined the thread of what it answers, across the two changes.
    const reply = await emailByMessageId(id, `<limits-${MAX_BATCH_MESSAGES + 3}@remote.test>`);
    const parent = await emailByMessageId(id, `<limits-${MAX_BATCH_MESSAGES}@remote.test>`);
    expect(reply.thread_id).toBe(parent.thread_id);
    // Contacts counted once per email naming them.
    const watcher = await db
      .prepare('SELECT emails_count FROM contacts WHERE account_id = ? AND identifier = ?')
      .bind(id, 'watcher0@remote.test')
      .first<{ emails_count: number }>();
    expect(watcher?.emails_count).toBe(
      Array.from({ length: total }, (_, k) => k + 1).filter((n) => n % 7 === 0).length,
    );
    // Sources and attachments come back byte for byte from the change's segment.
    for (const n of [3, MAX_BATCH_MESSAGES + 3, total]) {
      const row = await emailByMessageId(id, `<limits-${n}@remote.test>`);
      const raw = await api('GET', `/emails/${row.id}/raw`);
      expect(raw.body).toBe(
        n <= MAX_BATCH_MESSAGES ? first.sources[n - 1] : second.sources[n - 1 - MAX_BATCH_MESSAGES],
      );
      const email = await api('GET', `/emails/${row.id}`);
      if (n % 3 === 0) {
        const attachment = email.body.attachments[0];
        const body = await api('GET', `/emails/${row.id}/attachments/${attachment.id}`);
        expect(body.body).toBe(`attachment ${n} `.repeat(4));
      }
    }
    expect((await env.BLOBS.list({ prefix: `accounts/${id}/segments/` })).objects).toHaveLength(2);
  });

  it(`${MAX_BATCH_BYTES / 2 ** 20} MB of messages with attachments: within the limits`, {
    timeout: 120_000,
  }, async () => {
    const { id, stub, meter, db } = await leasedAccount();
    // Every message carries a ~190 KB attachment (base64 in the source: ~256 KB): 32 fill the batch.
    const count = Math.floor(MAX_BATCH_BYTES / (256 * 1024));
    const { messages } = mail(3, count, 190 * 1024);
    await applyIn(meter, stub, [{ type: 'messages', path: 'INBOX', uidvalidity: 1, messages }]);
    within(meter, `${count} messages of ~256 KB`);
    expect(await countOf(db, 'SELECT COUNT(*) AS n FROM emails WHERE account_id = ?', id)).toBe(count);
  });

  it(`a move of ${MAX_BATCH_MESSAGES} messages and their flags: within the limits, same ids`, {
    timeout: 120_000,
  }, async () => {
    const { id, stub, meter, db } = await leasedAccount();
    const { messages } = mail(1, MAX_BATCH_MESSAGES);
    await stub.applyChanges('gw-1', [{ type: 'messages', path: 'INBOX', uidvalidity: 1, messages }]);
    const before = await db.prepare('SELECT id FROM emails WHERE account_id = ? ORDER BY id').bind(id).all();
    const uids = messages.map((m) => m.uid);
    // The arriving side first (with the expunges to come), then the expunge, then flags in the new place.
    const arrived = messages.map((m, k) => ({ ...m, uid: 1000 + k }));
    const vanishing = [{ path: 'INBOX', uidvalidity: 1, uids }];
    await applyIn(meter, stub, [{ type: 'messages', path: 'Archive', uidvalidity: 1, messages: arrived, vanishing }]);
    within(meter, `the arrivals of a move of ${MAX_BATCH_MESSAGES}`);
    await applyIn(meter, stub, [{ type: 'vanished', path: 'INBOX', uidvalidity: 1, uids }]);
    within(meter, `the expunges of a move of ${MAX_BATCH_MESSAGES}`);
    const updates = arrived.map((m) => ({ uid: m.uid, flags: ['\\Seen', '\\Flagged'] }));
    await applyIn(meter, stub, [{ type: 'flags', path: 'Archive', uidvalidity: 1, updates }]);
    within(meter, `flags of ${MAX_BATCH_MESSAGES}`);

    const after = await db.prepare('SELECT id FROM emails WHERE account_id = ? ORDER BY id').bind(id).all();
    expect(after.results).toEqual(before.results);
    expect(
      await countOf(db, 'SELECT COUNT(*) AS n FROM emails WHERE account_id = ? AND unread = 0 AND starred = 1', id),
    ).toBe(MAX_BATCH_MESSAGES);
    expect((await outbox(id)).filter((e) => e.type === 'email.new')).toHaveLength(MAX_BATCH_MESSAGES);
  });
});

const subjectOf = (source: string) => /^Subject: (.*)$/m.exec(source)![1]!.trim();

async function emailByMessageId(accountId: string, messageId: string) {
  const row = await (await accountDb(accountId))
    .prepare('SELECT id, thread_id FROM emails WHERE account_id = ? AND message_id = ?')
    .bind(accountId, messageId)
    .first<{ id: string; thread_id: string }>();
  expect(row).not.toBeNull();
  return row!;
}
