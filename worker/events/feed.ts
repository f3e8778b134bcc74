/**
 * The events feed: GET /events lists what the service emitted, oldest first, in the order the events
 * were committed (`events.seq`, migrations/0010), with the webhooks' ids and envelopes
 * (`endpoint_id` null). `after=evt_…` resumes exactly after an event a subscriber processed; events
 * are kept 30 days (pruned by the minute sweep, webhooks/sweep.ts).
 */
import { z } from 'zod';
import { EVENT_OF_LIVE_ACCOUNT } from '../accounts/removed.ts';
import { invalid, notFound } from '../lib/errors.ts';
import { parseId } from '../lib/ids.ts';
import { type CursorList, cursorPaging, decodeCursor, encodeCursor } from '../lib/paging.ts';
import type { Env } from '../env.ts';
import { DIRECTORY_SHARD, shards } from '../shards/registry.ts';
import { findInShards } from '../shards/spread.ts';
import { placeholders } from '../lib/sql.ts';
import { iso } from '../lib/time.ts';
import { anyCase } from '../lib/validation.ts';
import { completeEmailEvents } from '../emails/event-data.ts';
import { eventEnvelope, type StoredEvent } from './envelope.ts';
import { EVENT_TYPES } from './types.ts';

/** How long events (and their delivery log) are kept. */
export const EVENT_RETENTION_MS = 30 * 24 * 3600 * 1000;

export const EventListQuery = cursorPaging.extend({
  account_id: z.string().optional().meta({ description: "Only this account's events (`acc_…`)." }),
  type: z
    .array(anyCase(EVENT_TYPES, (input) => `unknown event type ${JSON.stringify(input)}`))
    .max(EVENT_TYPES.length)
    .optional()
    .meta({
      description:
        'Only events of these types: repeat the parameter (`type=email.new&type=email.update`) or separate with commas.',
    }),
  after: z.string().optional().meta({
    description:
      'An `evt_…` id: only events committed after it (exclusive). Pass the last event you processed to get everything since.',
  }),
});
export type EventListQuery = z.infer<typeof EventListQuery>;

interface EventRow extends StoredEvent {
  seq: number;
}

const COLUMNS = 'ev.id, ev.type, ev.account_id, ev.data_json, ev.created_at, ev.seq';
const FROM = 'events ev';

/**
 * A removed account's events leave the API at once (its purge then deletes them); its
 * `account.remove`, written when its row goes, is the one that stays.
 */
export const visibleEvent = (prefix: '' | 'ev.') => EVENT_OF_LIVE_ACCOUNT(`${prefix}type`, `${prefix}account_id`);
const VISIBLE_EVENT = visibleEvent('ev.');

export const presentEvent = (row: StoredEvent) => eventEnvelope(row, null).payload;

/** The query string with `type` given once or more (and comma-separated values) as one array. */
export function eventListInput(query: Record<string, string>, types: string[] | undefined) {
  const { type: _type, ...rest } = query;
  return types === undefined ? rest : { ...rest, type: types.flatMap((t) => t.split(',')).filter(Boolean) };
}

/**
 * Where a reader of the feed is: per shard, the `seq` of the last event it was given there (each
 * shard numbers its own events, migrations/0010). One shard's cursor holds `[seq]`, as it always
 * did; several shards' hold `[name, seq, name, seq, …]`. A shard a cursor does not name starts at
 * 0 (a shard added since is read from its first event).
 */
type Positions = Map<string, number>;

function decodePositions(position: (string | number)[], names: string[]): Positions {
  const positions: Positions = new Map(names.map((name) => [name, 0]));
  const bad = () => invalid('cursor: not a cursor returned by this API');
  if (position.length === 1) {
    if (typeof position[0] !== 'number') throw bad();
    positions.set(DIRECTORY_SHARD, position[0]);
    return positions;
  }
  if (position.length % 2 !== 0) throw bad();
  for (let i = 0; i < position.length; i += 2) {
    const [name, seq] = [position[i], position[i + 1]];
    if (typeof name !== 'string' || typeof seq !== 'number') throw bad();
    if (positions.has(name)) positions.set(name, seq);
  }
  return positions;
}

const encodePositions = (positions: Positions): (string | number)[] =>
  positions.size === 1 ? [positions.get(DIRECTORY_SHARD)!] : [...positions].flat();

/**
 * `after=evt_…`: the event's shard resumes after it, every other shard after its last event created
 * no later than it (the feed orders shards' events by creation time).
 */
async function positionsAfter(env: Env, rawAfter: string): Promise<Positions> {
  const afterId = parseId('event', rawAfter);
  if (!afterId) throw invalid('after: must be an evt_… id');
  const all = shards(env);
  const found = await findInShards(env, async (shard) => {
    const row = await shard.DB.prepare('SELECT seq, created_at FROM events WHERE id = ?')
      .bind(afterId)
      .first<{ seq: number; created_at: string }>();
    return row ? { ...row, shard: shard.SHARD_NAME ?? DIRECTORY_SHARD } : null;
  });
  // An empty page here would tell a subscriber "nothing new" when it may have missed everything.
  if (!found) throw invalid(`after: no event ${afterId} (events are kept 30 days)`);
  const positions: Positions = new Map();
  for (const shard of all) {
    if (shard.name === found.shard) positions.set(shard.name, found.seq);
    else {
      const row = await shard.db
        .prepare('SELECT max(seq) AS seq FROM events WHERE created_at <= ?')
        .bind(found.created_at)
        .first<{ seq: number | null }>();
      positions.set(shard.name, row?.seq ?? 0);
    }
  }
  return positions;
}

export async function listEvents(env: Env, q: EventListQuery): Promise<CursorList<ReturnType<typeof presentEvent>>> {
  const types = q.type ? [...new Set(q.type)].sort() : [];
  const filtersKey = `events:account_id=${q.account_id ?? ''}&type=${types.join(',')}&after=${q.after ?? ''}`;
  const all = shards(env);
  let positions: Positions = new Map(all.map((s) => [s.name, 0]));
  if (q.cursor !== undefined) positions = decodePositions(decodeCursor(q.cursor, filtersKey), [...positions.keys()]);
  else if (q.after !== undefined) positions = await positionsAfter(env, q.after);
  const where = ['ev.seq > ?', VISIBLE_EVENT];
  const params: (string | number)[] = [];
  if (q.account_id !== undefined) {
    where.push('ev.account_id = ?');
    params.push(parseId('account', q.account_id) ?? '');
  }
  if (types.length) {
    where.push(`ev.type IN (${placeholders(types.length)})`);
    params.push(...types);
  }
  // Each shard's next events in its own order; an account's events may be in DB too (the directory's).
  const streams = await Promise.all(
    all.map(async (shard) => {
      const { results } = await shard.db
        .prepare(`SELECT ${COLUMNS} FROM ${FROM} WHERE ${where.join(' AND ')} ORDER BY ev.seq LIMIT ?`)
        .bind(positions.get(shard.name) ?? 0, ...params, q.limit + 1)
        .all<EventRow>();
      return { shard, rows: results };
    }),
  );
  // Merged by creation time (then shard order), never reordering within a shard: every event is
  // given exactly once, each shard's position only passing events given.
  const page: { shard: string; db: D1Database; row: EventRow }[] = [];
  const heads = streams.map(() => 0);
  while (page.length < q.limit) {
    let pick = -1;
    for (let i = 0; i < streams.length; i++) {
      const head = streams[i]!.rows[heads[i]!];
      if (!head) continue;
      const best = pick < 0 ? undefined : streams[pick]!.rows[heads[pick]!]!;
      if (!best || head.created_at < best.created_at) pick = i;
    }
    if (pick < 0) break;
    const { shard, rows } = streams[pick]!;
    const row = rows[heads[pick]!++]!;
    page.push({ shard: shard.name, db: shard.db, row });
    positions.set(shard.name, row.seq);
  }
  const hasMore = streams.some((s, i) => heads[i]! < s.rows.length);
  const complete = new Map<EventRow, StoredEvent>();
  for (const { shard } of streams) {
    const mine = page.filter((p) => p.shard === shard.name).map((p) => p.row);
    const done = await completeEmailEvents(shard.db, mine, 'data_json');
    for (const [i, row] of mine.entries()) complete.set(row, done[i]!);
  }
  return {
    object: 'Events',
    data: page.map((p) => presentEvent(complete.get(p.row)!)),
    has_more: hasMore,
    cursor: hasMore ? encodeCursor(encodePositions(positions), filtersKey) : null,
  };
}

export async function getEvent(env: Env, rawId: string | undefined) {
  const id = parseId('event', rawId);
  const found = id
    ? await findInShards(env, async (shard) => {
        const row = await shard.DB.prepare(`SELECT ${COLUMNS} FROM ${FROM} WHERE ev.id = ? AND ${VISIBLE_EVENT}`)
          .bind(id)
          .first<EventRow>();
        return row ? { db: shard.DB, row } : null;
      })
    : null;
  if (!found) throw notFound('Event');
  const [complete] = await completeEmailEvents(found.db, [found.row], 'data_json');
  return presentEvent(complete!);
}

/**
 * Events older than the retention, with their delivery log, a bounded step per sweep (by the
 * created_at index). Both statements pick the same rows: they run in one batch (one transaction).
 */
export function pruneStatements(db: D1Database, now: number, limit: number): D1PreparedStatement[] {
  const old = 'SELECT id FROM events WHERE created_at < ? ORDER BY created_at LIMIT ?';
  const cutoff = iso(now - EVENT_RETENTION_MS);
  return [
    db.prepare(`DELETE FROM webhook_conversations WHERE event_id IN (${old})`).bind(cutoff, limit),
    db.prepare(`DELETE FROM events WHERE id IN (${old})`).bind(cutoff, limit),
  ];
}
