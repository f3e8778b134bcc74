// Webhooks end to end: real Postfix → Dovecot → gateway → workerd → queue → a subscriber on loopback.
import { createHmac } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openImap } from '../mailserver/client.ts';
import type { MailServer } from '../mailserver/mailserver.ts';
import { mailboxIntent } from './connect.ts';
import type { Schemas } from '../../client/index.ts';
import { startSubscriber, type SubscriberCall } from './subscriber.ts';
import { dumpLogsOnFailure, eventually, startEndToEnd, stopEndToEnd, type Service } from './service.ts';

let mail: MailServer;
let service: Service;
let subscriber: Awaited<ReturnType<typeof startSubscriber>>;
let subscriberUrl: string;
let calls: SubscriberCall[] = [];
let endpoint: { id: string; secret: string };
let accountId: string;

const user = (name: string) => mail.users.find((u) => u.user === name)!;
const callsOf = (type: string, account?: string) =>
  calls.filter((c) => c.json.type === type && (!account || c.json.account_id === account));
const DAY = 24 * 3600 * 1000;

/**
 * Changes a user's password on the running server: Dovecot's passwd-file passdb re-reads the file
 * when its mtime or size changed, at the next login (no auth cache is configured). Passwords of a
 * different length keep the size check meaningful within the same second.
 */
function setPassword(name: string, password: string): void {
  const file = join(mail.dir, 'dovecot', 'users');
  const before = readFileSync(file, 'utf8');
  const after = before.replace(new RegExp(`^(${name}):\\{PLAIN\\}[^:]*:`, 'm'), `$1:{PLAIN}${password}:`);
  if (after === before) throw new Error(`no passwd-file entry changed for ${name}`);
  writeFileSync(file, after);
}

/** APPENDs messages with these arrival times (INTERNALDATE and Date header) to a user's INBOX. */
async function appendOld(name: string, items: { subject: string; at: Date }[]): Promise<void> {
  const imap = await openImap(mail.info(), name);
  try {
    for (const { subject, at } of items) {
      const raw = [
        'From: Old Friend <friend@remote.test>',
        `To: ${user(name).email}`,
        `Subject: ${subject}`,
        `Message-ID: <${subject.replace(/\W+/g, '-')}-${at.getTime()}@remote.test>`,
        `Date: ${at.toUTCString()}`,
        '',
        `sent ${at.toISOString()}`,
        '',
      ].join('\r\n');
      await imap.append('INBOX', raw, ['\\Seen'], at);
    }
  } finally {
    await imap.logout();
  }
}

beforeAll(async () => {
  subscriber = await startSubscriber();
  ({ url: subscriberUrl, calls } = subscriber);
  // A short auth retry: after a refused login the gateway tries again in 2 s (default 5 min).
  ({ mail, service } = await startEndToEnd('gw-hooks', { GATEWAY_AUTH_RETRY_MS: '2000' }));
});

afterEach((ctx) => dumpLogsOnFailure(ctx, service));

afterAll(async () => {
  await stopEndToEnd({ mail, service });
  subscriber?.close();
});

describe('webhooks end to end', () => {
  it('delivers every event the product emits, signed, once per event', { timeout: 240_000 }, async () => {
    const created = await service.client.POST('/api/v1/webhooks/endpoints', {
      body: {
        url: subscriberUrl,
        description: 'everything',
        trigger_events: [
          'email.new',
          'email.new.bounce',
          'email.update',
          'email.delete',
          'email.draft.new',
          'email.draft.delete',
          'email.folder.create',
          'email.folder.update',
          'email.folder.delete',
          'account.add',
          'account.reconnect',
          'account.remove',
          'account.status.running',
          'account.status.errored',
          'account.status.disconnected',
          'tracking.open',
          'tracking.click',
          'account.initial_sync.running',
          'account.initial_sync.completed',
        ],
        headers: [{ key: 'X-Team', value: 'mail' }],
      },
    });
    expect(created.response.status, JSON.stringify(created.error)).toBe(200);
    endpoint = created.data!;
    const alice = user('alice');
    const connect = (extra: Record<string, unknown> = {}) => mailboxIntent(mail.info(), 'alice', extra);
    const account = await eventually(
      async () => {
        const res = await service.api('POST', '/auth/intent', connect());
        return res.status === 200 ? res.body : null;
      },
      { what: 'connecting alice', timeoutMs: 60_000, intervalMs: 500 },
    );
    accountId = account.id;
    await eventually(() => callsOf('account.add').length === 1, { what: 'account.add' });

    // email.new, with a verifiable signature
    await mail.deliver({ from: 'Bob <bob@remote.test>', to: alice.email, subject: 'webhook me', text: 'hello hooks' });
    const [newCall] = await eventually(() => (callsOf('email.new').length ? callsOf('email.new') : null), {
      what: 'email.new',
    });
    expect(newCall!.json).toMatchObject({
      object: 'Event',
      type: 'email.new',
      account_id: accountId,
      endpoint_id: endpoint.id,
    });
    expect(newCall!.json.id).toMatch(/^evt_/);
    expect(newCall!.json.data).toMatchObject({ object: 'Email', subject: 'webhook me', origin: 'external' });
    expect(newCall!.headers['x-team']).toBe('mail');
    const sig = String(newCall!.headers['x-email-engine-signature']);
    const [, t, v1] = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(sig)!;
    expect(createHmac('sha256', endpoint.secret).update(`${t}.${newCall!.body}`).digest('hex')).toBe(v1);
    expect(newCall!.headers['webhook-id']).toBe(newCall!.json.id);
    const verified = new Webhook(endpoint.secret).verify(newCall!.body, {
      'webhook-id': String(newCall!.headers['webhook-id']),
      'webhook-timestamp': String(newCall!.headers['webhook-timestamp']),
      'webhook-signature': String(newCall!.headers['webhook-signature']),
    });
    expect(verified).toMatchObject({ id: newCall!.json.id });
    const emailId = newCall!.json.data.id;

    // email.update and email.delete, from another client
    const imap = await openImap(mail.info(), 'alice');
    try {
      await imap.mailboxOpen('INBOX');
      await imap.messageFlagsAdd('1:*', ['\\Seen']);
      await eventually(
        () => callsOf('email.update').some((c) => c.json.data.id === emailId && c.json.data.unread === false),
        { what: 'email.update' },
      );

      // folders
      await imap.mailboxCreate('Receipts');
      await eventually(() => callsOf('email.folder.create').some((c) => c.json.data.name === 'Receipts'), {
        what: 'email.folder.create',
        timeoutMs: 30_000,
      });
      await imap.mailboxRename('Receipts', 'Invoices');
      await eventually(
        () =>
          callsOf('email.folder.create').some((c) => c.json.data.name === 'Invoices') ||
          callsOf('email.folder.update').length > 0,
        { what: 'the rename' },
      );
      await imap.mailboxDelete('Invoices');
      await eventually(() => callsOf('email.folder.delete').length > 0, {
        what: 'email.folder.delete',
        timeoutMs: 30_000,
      });

      // drafts
      await imap.append(
        'Drafts',
        [
          'From: alice@example.test',
          'To: bob@example.test',
          'Subject: draft one',
          'Message-ID: <draft-1@example.test>',
          '',
          'draft body',
          '',
        ].join('\r\n'),
        ['\\Draft'],
      );
      const draft = await eventually(() => callsOf('email.draft.new')[0], {
        what: 'email.draft.new',
        timeoutMs: 30_000,
      });
      expect(draft.json.data).toMatchObject({ object: 'Draft', subject: 'draft one' });
      await imap.mailboxOpen('Drafts');
      await imap.messageDelete('1:*');
      // A message in no folder is deleted once every folder was read after it left: at the default
      // poll interval (15 s), up to two polls after the expunge of a folder without IDLE.
      const evidence = 75_000;
      await eventually(() => callsOf('email.draft.delete').length === 1, {
        what: 'email.draft.delete',
        timeoutMs: evidence,
      });

      await imap.mailboxOpen('INBOX');
      await imap.messageDelete('1:*');
      await eventually(() => callsOf('email.delete').some((c) => c.json.data.id === emailId), {
        what: 'email.delete',
        timeoutMs: evidence,
      });
    } finally {
      await imap.logout();
    }

    // a bounce
    const bounce = readFileSync(new URL('../fixtures/bounces/flufl/postfix_01.txt', import.meta.url));
    await mail.deliver({ from: 'MAILER-DAEMON@remote.test', to: alice.email, raw: bounce });
    const bounceCall = await eventually(() => callsOf('email.new.bounce')[0], { what: 'email.new.bounce' });
    expect(bounceCall.json.data.recipient).toMatch(/@/);

    // tracking.open and tracking.click: a tracked send, then its pixel and its rewritten link
    const tracked = await service.api('POST', '/emails', {
      account_id: accountId,
      to: [{ identifier: user('carol').email }],
      subject: 'tracked hook',
      body: '<html><body><p>see <a href="https://example.org/offer?id=7&amp;src=hook">the offer</a></p></body></html>',
      tracking_options: { opens: true, clicks: true, label: 'hooks-label' },
    });
    expect(tracked.status, JSON.stringify(tracked.body)).toBe(200);
    const trackingId: string = tracked.body.tracking_id;
    expect(trackingId).toMatch(/^trk_/);
    // The Sent copy syncs with the tracking id (the events name it by email_id).
    const sentCall = await eventually(() => callsOf('email.new').find((c) => c.json.data.tracking_id === trackingId), {
      what: 'email.new of the tracked Sent copy',
      timeoutMs: 60_000,
    });
    expect(sentCall.json.data).toMatchObject({ origin: 'api', subject: 'tracked hook' });
    const sent = await service.api('GET', `/emails/${sentCall.json.data.id}`);
    expect(sent.status).toBe(200);
    const html = String(sent.body.body);
    const pixel = /<img src="([^"]+)"/.exec(html)![1]!.replace(/&amp;/g, '&');
    const link = /<a href="([^"]+)"/.exec(html)![1]!.replace(/&amp;/g, '&');
    expect(pixel.startsWith(`${service.base}/t/open/${trackingId}?`)).toBe(true);
    expect(link.startsWith(`${service.base}/t/click/${trackingId}?`)).toBe(true);
    const opened = await service.fetch(pixel, { headers: { 'User-Agent': 'HookReader/1.0' } });
    expect(opened.status).toBe(200);
    expect(opened.headers.get('content-type')).toBe('image/gif');
    const openCall = await eventually(() => callsOf('tracking.open')[0], { what: 'tracking.open' });
    const clicked = await service.fetch(link, { redirect: 'manual', headers: { 'User-Agent': 'HookClicker/2.0' } });
    expect(clicked.status).toBe(302);
    expect(clicked.headers.get('location')).toBe('https://example.org/offer?id=7&src=hook');
    const clickCall = await eventually(() => callsOf('tracking.click')[0], { what: 'tracking.click' });
    for (const [call, type] of [
      [openCall, 'tracking.open'],
      [clickCall, 'tracking.click'],
    ] as const) {
      expect(call.json).toMatchObject({ object: 'Event', type, account_id: accountId, endpoint_id: endpoint.id });
      expect(call.json.id).toMatch(/^evt_/);
      expect(call.headers['webhook-id']).toBe(call.json.id);
      expect(
        new Webhook(endpoint.secret).verify(call.body, {
          'webhook-id': String(call.headers['webhook-id']),
          'webhook-timestamp': String(call.headers['webhook-timestamp']),
          'webhook-signature': String(call.headers['webhook-signature']),
        }),
      ).toMatchObject({ id: call.json.id, type });
    }
    expect(openCall.json.data).toEqual({
      email_id: sentCall.json.data.id,
      tracking_id: trackingId,
      user_agent: 'HookReader/1.0',
      ip: expect.any(String),
      label: 'hooks-label',
    });
    expect(clickCall.json.data).toEqual({
      email_id: sentCall.json.data.id,
      tracking_id: trackingId,
      url: 'https://example.org/offer?id=7&src=hook',
      user_agent: 'HookClicker/2.0',
      ip: expect.any(String),
      label: 'hooks-label',
    });
    expect(openCall.json.data.ip).toMatch(/^(127\.0\.0\.1|::1|::ffff:127\.0\.0\.1)$/);
    expect(clickCall.json.data.ip).toBe(openCall.json.data.ip);

    // status changes: the server goes away (disconnected), comes back refusing the password (errored),
    // then accepts it again (running).
    await mail.stopDovecot();
    await eventually(() => callsOf('account.status.disconnected').length === 1, {
      what: 'account.status.disconnected',
      timeoutMs: 60_000,
    });
    setPassword(alice.user, 'a-changed-and-longer-password');
    try {
      await mail.startDovecot();
      const errored = await eventually(() => callsOf('account.status.errored')[0], {
        what: 'account.status.errored',
        timeoutMs: 60_000,
      });
      expect(errored.json).toMatchObject({
        object: 'Event',
        type: 'account.status.errored',
        account_id: accountId,
        endpoint_id: endpoint.id,
      });
      expect(errored.json.data).toMatchObject({ object: 'Account', id: accountId, status: 'errored' });
      expect(errored.json.data.last_error).toMatch(/login failed/i);
      expect(errored.json.data.last_error).not.toContain('a-changed-and-longer-password');
      expect(callsOf('account.status.running')).toHaveLength(0);
    } finally {
      setPassword(alice.user, alice.password);
    }
    const running = await eventually(() => callsOf('account.status.running')[0], {
      what: 'account.status.running',
      timeoutMs: 90_000,
    });
    expect(running.json.data).toMatchObject({ object: 'Account', id: accountId, status: 'running', last_error: null });
    expect(callsOf('account.status.running')).toHaveLength(1);
    expect(callsOf('account.status.errored')).toHaveLength(1);
    expect(callsOf('account.status.disconnected')).toHaveLength(1);
    // In that order.
    const at = (c: SubscriberCall) => calls.indexOf(c);
    expect(at(callsOf('account.status.disconnected')[0]!)).toBeLessThan(at(callsOf('account.status.errored')[0]!));
    expect(at(callsOf('account.status.errored')[0]!)).toBeLessThan(at(running));

    // reconnect, then remove
    const again = await service.api('POST', '/auth/intent', connect({ account_id: accountId }));
    expect(again.status).toBe(200);
    await eventually(() => callsOf('account.reconnect').length === 1, { what: 'account.reconnect' });
    await service.api('DELETE', `/accounts/${accountId}`);
    await eventually(() => callsOf('account.remove').length === 1, { what: 'account.remove' });

    // account.initial_sync.running, then .completed: bob connects with a 3-day initial sync over older mail
    const now = Date.now();
    await appendOld('bob', [
      { subject: 'old outside window', at: new Date(now - 10 * DAY) },
      { subject: 'old two days', at: new Date(now - 2 * DAY) },
      { subject: 'old one day', at: new Date(now - 1 * DAY) },
    ]);
    const bobAccount = await eventually(
      async () => {
        const res = await service.api(
          'POST',
          '/auth/intent',
          mailboxIntent(mail.info(), 'bob', { initial_sync_enable: true, initial_sync_days: 3 }),
        );
        return res.status === 200 ? res.body : null;
      },
      { what: 'connecting bob', timeoutMs: 60_000, intervalMs: 500 },
    );
    await eventually(() => callsOf('account.add', bobAccount.id).length === 1, { what: "bob's account.add" });
    const syncCompleted = await eventually(() => callsOf('account.initial_sync.completed', bobAccount.id)[0], {
      what: 'account.initial_sync.completed',
      timeoutMs: 60_000,
    });
    const syncRunning = callsOf('account.initial_sync.running', bobAccount.id);
    expect(syncRunning).toHaveLength(1);
    expect(calls.indexOf(syncRunning[0]!)).toBeLessThan(calls.indexOf(syncCompleted));
    expect(Date.parse(syncRunning[0]!.json.created_at)).toBeLessThanOrEqual(Date.parse(syncCompleted.json.created_at));
    for (const [call, state] of [
      [syncRunning[0]!, 'running'],
      [syncCompleted, 'completed'],
    ] as const) {
      expect(call.json).toMatchObject({
        object: 'Event',
        type: `account.initial_sync.${state}`,
        account_id: bobAccount.id,
        endpoint_id: endpoint.id,
      });
      expect(call.json.data).toMatchObject({
        object: 'Account',
        id: bobAccount.id,
        initial_sync: state,
        initial_sync_enable: true,
        initial_sync_days: 3,
      });
    }
    // The pulled mail: exactly the two messages inside the window.
    const pulled = await eventually(
      () => (callsOf('email.new', bobAccount.id).length >= 2 ? callsOf('email.new', bobAccount.id) : null),
      { what: "bob's pulled email.new" },
    );
    expect(pulled.map((c) => c.json.data.subject).sort()).toEqual(['old one day', 'old two days']);

    // Once per event id; every call answered 200, so every conversation is delivered.
    const ids = calls.map((c) => c.json.id);
    expect(new Set(ids).size).toBe(ids.length);
    const log = await service.client.GET('/api/v1/webhooks/conversations', {
      params: { query: { endpoint_id: endpoint.id, limit: 250 } },
    });
    // Alice's account was removed: of its calls, only account.remove stays in the log and the feed.
    const kept = calls.filter((c) => c.json.account_id !== accountId || c.json.type === 'account.remove');
    expect(kept.length).toBeLessThan(calls.length);
    expect(log.data!.data.map((c) => c.event_id).sort()).toEqual(kept.map((c) => c.json.id).sort());
    expect(
      log.data!.data.every((c) => c.status === 'delivered' && c.attempts === 1 && c.last_status_code === 200),
    ).toBe(true);
    const { response: gone } = await service.client.GET('/api/v1/events/{id}', {
      params: {
        path: { id: calls.find((c) => c.json.account_id === accountId && c.json.type === 'email.new')!.json.id },
      },
    });
    expect(gone.status).toBe(404);
    // The events feed holds the same events with the same ids and envelopes (endpoint_id aside).
    for (const call of kept.slice(0, 5)) {
      const { data: event } = await service.client.GET('/api/v1/events/{id}', {
        params: { path: { id: call.json.id } },
      });
      expect({ ...event, endpoint_id: endpoint.id }).toEqual(call.json);
    }
  });

  it('a subscriber that was down recovers all 50 events it missed, in order, through GET /events?after=', {
    timeout: 300_000,
  }, async () => {
    const down = await startSubscriber();
    const url = down.url;
    const received = () => down.calls.map((c) => c.json);
    const carol = await eventually(
      async () => {
        const res = await service.client.POST('/api/v1/auth/intent', {
          body: mailboxIntent(mail.info(), 'carol') as Schemas['AuthIntentRequest'],
        });
        return res.data;
      },
      { what: 'connecting carol', timeoutMs: 60_000, intervalMs: 500 },
    );
    const hook = await service.client.POST('/api/v1/webhooks/endpoints', {
      body: { url, trigger_events: ['email.new'], account_ids: [carol.id] },
    });
    expect(hook.response.status, JSON.stringify(hook.error)).toBe(200);
    const imap = await openImap(mail.info(), 'carol');
    const append = (subject: string) =>
      imap.append(
        'INBOX',
        [`From: feed@remote.test`, `To: ${user('carol').email}`, `Subject: ${subject}`, '', subject, ''].join('\r\n'),
      );
    try {
      await append('before the outage');
      const last = await eventually(() => received().find((e) => e.data.subject === 'before the outage'), {
        what: 'the last event processed before the outage',
      });

      // The subscriber goes down (connections refused), and 50 events happen meanwhile.
      await down.close();
      const subjects = Array.from({ length: 50 }, (_, i) => `missed ${String(i + 1).padStart(2, '0')}`);
      for (const subject of subjects) await append(subject);
      // The service tried each of them and failed: the calls wait for their retries.
      await eventually(
        async () => {
          const { data } = await service.client.GET('/api/v1/webhooks/conversations', {
            params: { query: { endpoint_id: hook.data!.id, limit: 250 } },
          });
          const failed = data!.data.filter((c) => c.status !== 'delivered' && c.attempts >= 1);
          return failed.length === 50;
        },
        { what: '50 failed calls', timeoutMs: 120_000, intervalMs: 500 },
      );
      expect(received().filter((e) => e.data.subject.startsWith('missed '))).toEqual([]);

      // Back up: everything after the last event processed, in pages, in order.
      const recovered: any[] = [];
      let cursor: string | undefined;
      do {
        const { data, error } = await service.client.GET('/api/v1/events', {
          params: { query: { after: last.id, account_id: carol.id, type: ['email.new'], limit: 20, cursor } },
        });
        if (!data) throw new Error(JSON.stringify(error));
        recovered.push(...data.data);
        cursor = data.cursor ?? undefined;
      } while (cursor);
      expect(recovered.map((e) => (e.data as { subject: string }).subject)).toEqual(subjects);
      expect(new Set(recovered.map((e) => e.id)).size).toBe(50);
      expect(recovered.every((e) => e.endpoint_id === null && e.account_id === carol.id)).toBe(true);
      // The same ids as the calls that failed.
      const { data: log } = await service.client.GET('/api/v1/webhooks/conversations', {
        params: { query: { endpoint_id: hook.data!.id, limit: 250 } },
      });
      const failedIds = new Set(log!.data.filter((c) => c.status !== 'delivered').map((c) => c.event_id));
      expect(recovered.every((e) => failedIds.has(e.id))).toBe(true);
      // Without filters the feed has them too, in the same order, among the other events.
      const { data: all } = await service.client.GET('/api/v1/events', {
        params: { query: { after: last.id, limit: 250 } },
      });
      const ids = recovered.map((e) => e.id);
      expect(all!.data.map((e) => e.id).filter((id) => ids.includes(id))).toEqual(ids);
    } finally {
      await imap.logout();
      await service.client.PATCH('/api/v1/webhooks/endpoints/{id}', {
        params: { path: { id: hook.data!.id } },
        body: { enabled: false },
      });
    }
  });

  it('sends nothing to an endpoint whose trigger_events do not match', async () => {
    const quiet = await service.api('POST', '/webhooks/endpoints', {
      url: `${subscriberUrl}?quiet=1`,
      trigger_events: ['tracking.click'],
    });
    expect(quiet.status).toBe(200);
    const log = await service.api('GET', `/webhooks/conversations?endpoint_id=${quiet.body.id}`);
    expect(log.body.data).toEqual([]);
    expect(calls.some((c) => c.json.endpoint_id === quiet.body.id)).toBe(false);
  });
});
