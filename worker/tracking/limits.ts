/**
 * Tracking links are public, so hits are limited before storage (lib/rate-limits.ts): at most
 * TRACKING_RATE_LIMIT hits per client address (429 beyond), and the same link from the same address
 * reaches D1 once per minute (TRACKING_REPEAT_LIMIT, limit 1): repeats are served without a query.
 *
 * Tracking hits that reach D1 become events sparingly. A mail client or a link scanner often fetches a pixel or a
 * link many times in a burst (prefetch, reloads, retries): repeats of the same open, or the same
 * click, within DEDUPE_WINDOW_MS are one event. On top of that, one tracking id makes at most
 * RATE_LIMIT events per RATE_WINDOW_MS, so a public URL hammered on purpose cannot flood the
 * outbox and the subscribers. The pixel and the redirect are served either way.
 */
import { sha256Hex } from '../../common/crypto.ts';
import { withinLimit } from '../lib/rate-limits.ts';

export const DEDUPE_WINDOW_MS = 60_000;
export const RATE_WINDOW_MS = 60 * 60_000;
export const RATE_LIMIT = 30;

type Hit = { purpose: 'open' } | { purpose: 'click'; url: string };

/** Whether this address's hit on this link is its first this minute, the only one that reaches D1. */
export async function firstFromAddress(
  limiter: RateLimit | undefined,
  address: string,
  trackingId: string,
  hit: Hit,
): Promise<boolean> {
  const url = hit.purpose === 'click' ? hit.url : '';
  return withinLimit(limiter, await sha256Hex(`${address}\n${trackingId}\n${hit.purpose}\n${url}`));
}

/** Whether this hit should become an event; records it either way. */
export async function admitHit(db: D1Database, trackingId: string, hit: Hit, now: number): Promise<boolean> {
  const key = hit.purpose === 'open' ? 'open' : `click:${await sha256Hex(hit.url)}`;
  // A new window for this key only when the last one is over: RETURNING gives a row only then.
  const fresh = await db
    .prepare(
      `INSERT INTO tracking_hits (tracking_id, key, window_start_ms, count) VALUES (?1, ?2, ?3, 1)
       ON CONFLICT (tracking_id, key) DO UPDATE SET window_start_ms = ?3, count = count + 1
         WHERE tracking_hits.window_start_ms <= ?4
       RETURNING 1 AS fresh`,
    )
    .bind(trackingId, key, now, now - DEDUPE_WINDOW_MS)
    .first();
  if (!fresh) return false;
  const counted = await db
    .prepare(
      `INSERT INTO tracking_hits (tracking_id, key, window_start_ms, count) VALUES (?1, '*', ?2, 1)
       ON CONFLICT (tracking_id, key) DO UPDATE SET
         count = CASE WHEN tracking_hits.window_start_ms <= ?3 THEN 1 ELSE tracking_hits.count + 1 END,
         window_start_ms = CASE WHEN tracking_hits.window_start_ms <= ?3 THEN ?2 ELSE tracking_hits.window_start_ms END
       RETURNING count`,
    )
    .bind(trackingId, now, now - RATE_WINDOW_MS)
    .first<{ count: number }>();
  return (counted?.count ?? 0) <= RATE_LIMIT;
}

/** The sweep's bounded cleanup of windows that are over. */
export function trackingCleanup(db: D1Database, now: number, limit: number): D1PreparedStatement {
  return db
    .prepare(
      `DELETE FROM tracking_hits WHERE (tracking_id, key) IN (
         SELECT tracking_id, key FROM tracking_hits WHERE window_start_ms < ? LIMIT ?)`,
    )
    .bind(now - RATE_WINDOW_MS, limit);
}
