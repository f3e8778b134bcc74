// Tracking of sent mail: links rewritten and signed with an open pixel, opens and clicks of a sent
// email whose copy synced recorded as events, tampered links refused; and a synced draft keeping the
// draft_id it was created with.
import { env, exports } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { applyTracking, clickUrl, openUrl, verifyTrackingSignature } from '../../worker/tracking/links.ts';
import { newId } from '../../worker/lib/ids.ts';
import { recordOutgoing } from '../../worker/send/outgoing.ts';
import { createSyncedAccount, messageIn, outbox, rawMessage } from './sync-helpers.ts';

const base = 'https://mail.example.com';

describe('tracking', () => {
  it('rewrites http(s) links, adds the pixel, and signs both', async () => {
    const html =
      '<html><body><p><a href="https://example.org/a?x=1&amp;y=2">a</a> <a href="mailto:x@example.org">m</a></p></body></html>';
    const out = await applyTracking(env, html, { base, trackingId: 'trk_TEST', opens: true, clicks: true });
    expect(out).toContain('mailto:x@example.org');
    expect(out).not.toContain('href="https://example.org');
    const click = /href="([^"]+)"/.exec(out)![1]!.replace(/&amp;/g, '&');
    const url = new URL(click);
    expect(url.pathname).toBe('/t/click/trk_TEST');
    expect(url.searchParams.get('u')).toBe('https://example.org/a?x=1&y=2');
    expect(
      await verifyTrackingSignature(
        env,
        'click',
        'trk_TEST',
        'https://example.org/a?x=1&y=2',
        url.searchParams.get('s')!,
      ),
    ).toBe(true);
    expect(
      await verifyTrackingSignature(env, 'click', 'trk_TEST', 'https://evil.example/', url.searchParams.get('s')!),
    ).toBe(false);
    expect(out).toMatch(/<img src="https:\/\/mail\.example\.com\/t\/open\/trk_TEST\?s=[\w-]+"[^>]*><\/body>/);
  });

  it('records opens and clicks of a sent email whose copy synced, and refuses tampered links', async () => {
    const account = await createSyncedAccount();
    await account.stub.acquireLease('gw-1');
    const trackingId = newId('tracking');
    const messageId = `<sent-${crypto.randomUUID()}@example.test>`;
    await recordOutgoing(account.db, {
      account_id: account.id,
      message_id: messageId,
      kind: 'send',
      tracking_id: trackingId,
      tracking_label: 'spring',
      draft_id: null,
      created_at: new Date().toISOString(),
    });
    await account.stub.applyChanges('gw-1', [
      {
        type: 'messages',
        path: 'Sent',
        uidvalidity: 1,
        messages: [messageIn(1, rawMessage({ from: account.email, to: 'bob@example.test', messageId }), ['\\Seen'])],
      },
    ]);
    const created = (await outbox(account.id)).find((e) => e.type === 'email.new')!;
    expect(created.data).toMatchObject({ origin: 'api', tracking_id: trackingId, message_id: messageId, role: 'SENT' });

    const open = await exports.default.fetch(await openUrl(env, base, trackingId), {
      headers: { 'User-Agent': 'UA/1', 'CF-Connecting-IP': '203.0.113.9' },
    });
    expect(open.status).toBe(200);
    expect(open.headers.get('content-type')).toBe('image/gif');
    const target = 'https://example.org/landing?q=1';
    const click = await exports.default.fetch(await clickUrl(env, base, trackingId, target), {
      redirect: 'manual',
      headers: { 'User-Agent': 'UA/2' },
    });
    expect(click.status).toBe(302);
    expect(click.headers.get('location')).toBe(target);

    const events = (await outbox(account.id)).filter((e) => e.type.startsWith('tracking.'));
    expect(events).toEqual([
      {
        type: 'tracking.open',
        data: {
          email_id: created.data.id,
          tracking_id: trackingId,
          user_agent: 'UA/1',
          ip: '203.0.113.9',
          label: 'spring',
        },
      },
      {
        type: 'tracking.click',
        data: {
          email_id: created.data.id,
          tracking_id: trackingId,
          url: target,
          user_agent: 'UA/2',
          ip: '',
          label: 'spring',
        },
      },
    ]);

    const tampered = new URL(await clickUrl(env, base, trackingId, target));
    tampered.searchParams.set('u', 'https://evil.example/');
    for (const url of [
      tampered.toString(),
      `${base}/t/click/${trackingId}?u=${encodeURIComponent(target)}`,
      `${base}/t/open/${trackingId}?s=AAAA`,
      `${base}/t/open/${trackingId}`,
    ]) {
      const res = await exports.default.fetch(url, { redirect: 'manual' });
      expect(res.status, url).toBe(404);
      expect(((await res.json()) as { type: string }).type).toBe('errors/not_found');
    }
    expect((await outbox(account.id)).filter((e) => e.type.startsWith('tracking.'))).toHaveLength(2);
  });

  it('gives a synced draft the draft_id it was created with', async () => {
    const account = await createSyncedAccount();
    await account.stub.acquireLease('gw-1');
    const draftId = newId('draft');
    const messageId = `<draft-${crypto.randomUUID()}@example.test>`;
    await recordOutgoing(account.db, {
      account_id: account.id,
      message_id: messageId,
      kind: 'draft',
      tracking_id: null,
      tracking_label: null,
      draft_id: draftId,
      created_at: new Date().toISOString(),
    });
    await account.stub.applyChanges('gw-1', [
      {
        type: 'messages',
        path: 'Drafts',
        uidvalidity: 1,
        messages: [messageIn(1, rawMessage({ messageId }), ['\\Draft', '\\Seen'])],
      },
    ]);
    const event = (await outbox(account.id)).find((e) => e.type === 'email.draft.new')!;
    expect(event.data).toMatchObject({ object: 'Draft', draft_id: draftId, origin: 'api' });
  });
});
