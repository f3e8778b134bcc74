/**
 * Public tracking endpoints (outside /api/v1, no API key): the open pixel and the click redirect.
 * Only links this service signed are honoured (see tracking/links.ts); anything else is a 404 in the
 * API's error shape, so the redirect can never be pointed at another site.
 */
import { Hono, type Context } from 'hono';
import type { AppEnv } from '../env.ts';
import { dispatchEvents, eventStatementIfLive, newEvent } from '../events/outbox.ts';
import { notFound } from '../lib/errors.ts';
import { fromBase64 } from '../lib/crypto.ts';
import { parseId } from '../lib/ids.ts';
import { outgoingByTrackingId } from '../send/outgoing.ts';
import { clientAddress, limitPerAddress } from '../lib/rate-limits.ts';
import { admitHit, firstFromAddress } from '../tracking/limits.ts';
import { verifyTrackingSignature } from '../tracking/links.ts';
import { findInShards } from '../shards/spread.ts';

/** A transparent 1×1 GIF. */
const PIXEL = fromBase64('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7');
const NO_STORE = { 'Cache-Control': 'no-store, max-age=0', 'Referrer-Policy': 'no-referrer' };

async function verified(c: Context<AppEnv>, purpose: 'open' | 'click', url = ''): Promise<string> {
  const trackingId = parseId('tracking', c.req.param('tracking_id'));
  if (!trackingId || !(await verifyTrackingSignature(c.env, purpose, trackingId, url, c.req.query('s'))))
    throw notFound('Tracking link');
  return trackingId;
}

/**
 * tracking.open / tracking.click with {email_id, tracking_id, url?, user_agent, ip, label}, through
 * the outbox; bursts and floods of hits are cut down first (tracking/limits.ts): a repeat of this
 * address's hit on this link within the minute is served without any query.
 */
async function record(
  c: Context<AppEnv>,
  type: 'tracking.open' | 'tracking.click',
  trackingId: string,
  url?: string,
): Promise<void> {
  const hit = url === undefined ? { purpose: 'open' as const } : { purpose: 'click' as const, url };
  if (!(await firstFromAddress(c.env.TRACKING_REPEAT_LIMIT, clientAddress(c), trackingId, hit))) return;
  // The outgoing record lives in its account's shard.
  const found = await findInShards(c.env, async (env) => {
    const record = await outgoingByTrackingId(env.DB, trackingId);
    return record ? { env, record } : null;
  });
  if (!found) return; // the account was removed since
  const { env, record: outgoing } = found;
  const db = env.DB;
  if (!(await admitHit(db, trackingId, hit, Date.now()))) return;
  const email = await db
    .prepare('SELECT id FROM emails WHERE account_id = ? AND tracking_id = ? ORDER BY created_at LIMIT 1')
    .bind(outgoing.account_id, trackingId)
    .first<{ id: string }>();
  const event = newEvent(type, outgoing.account_id, {
    email_id: email?.id ?? null,
    tracking_id: trackingId,
    ...(url === undefined ? {} : { url }),
    user_agent: c.req.header('user-agent') ?? '',
    ip:
      c.req.header('cf-connecting-ip') ??
      c.req.header('x-real-ip') ??
      c.req.header('x-forwarded-for')?.split(',')[0]?.trim() ??
      '',
    label: outgoing.tracking_label,
  });
  // The account may be removed between the lookup above and here: then no event is made.
  const inserted = await eventStatementIfLive(db, { ...event, account_id: outgoing.account_id }).run();
  if (inserted.meta.changes === 0) return;
  c.executionCtx.waitUntil(dispatchEvents(env, [event.id]));
}

export const tracking = new Hono<AppEnv>()
  .use(limitPerAddress((env) => env.TRACKING_RATE_LIMIT, 'Too many tracking hits from this address.'))
  .get('/open/:tracking_id', async (c) => {
    const trackingId = await verified(c, 'open');
    await record(c, 'tracking.open', trackingId);
    return new Response(PIXEL, { headers: { 'Content-Type': 'image/gif', ...NO_STORE } });
  })
  .get('/click/:tracking_id', async (c) => {
    const url = c.req.query('u') ?? '';
    const trackingId = await verified(c, 'click', url);
    if (!/^https?:\/\//i.test(url)) throw notFound('Tracking link');
    await record(c, 'tracking.click', trackingId, url);
    return new Response(null, { status: 302, headers: { Location: url, ...NO_STORE } });
  });
