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
import { cursorList, cursorPaging, decodeCursor } from '../lib/paging.ts';
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

export async function listEvents(db: D1Database, q: EventListQuery) {
  const types = q.type ? [...new Set(q.type)].sort() : [];
  const filtersKey = `events:account_id=${q.account_id ?? ''}&type=${types.join(',')}&after=${q.after ?? ''}`;
  let position = 0;
  if (q.cursor !== undefined) {
    const [seq] = decodeCursor(q.cursor, filtersKey);
    if (typeof seq !== 'number') throw invalid('cursor: not a cursor returned by this API');
    position = seq;
  } else if (q.after !== undefined) {
    const afterId = parseId('event', q.after);
    if (!afterId) throw invalid('after: must be an evt_… id');
    const row = await db.prepare('SELECT seq FROM events WHERE id = ?').bind(afterId).first<{ seq: number }>();
    // An empty page here would tell a subscriber "nothing new" when it may have missed everything.
    if (!row) throw invalid(`after: no event ${afterId} (events are kept 30 days)`);
    position = row.seq;
  }
  const where = ['ev.seq > ?', VISIBLE_EVENT];
  const params: (string | number)[] = [position];
  if (q.account_id !== undefined) {
    where.push('ev.account_id = ?');
    params.push(parseId('account', q.account_id) ?? '');
  }
  if (types.length) {
    where.push(`ev.type IN (${placeholders(types.length)})`);
    params.push(...types);
  }
  const { results } = await db
    .prepare(`SELECT ${COLUMNS} FROM ${FROM} WHERE ${where.join(' AND ')} ORDER BY ev.seq LIMIT ?`)
    .bind(...params, q.limit + 1)
    .all<EventRow>();
  const rows = await completeEmailEvents(db, results, 'data_json');
  return cursorList('Events', rows, q.limit, filtersKey, (row) => [row.seq], presentEvent);
}

export async function getEvent(db: D1Database, rawId: string | undefined) {
  const id = parseId('event', rawId);
  const row = id
    ? await db.prepare(`SELECT ${COLUMNS} FROM ${FROM} WHERE ev.id = ? AND ${VISIBLE_EVENT}`).bind(id).first<EventRow>()
    : null;
  if (!row) throw notFound('Event');
  const [complete] = await completeEmailEvents(db, [row], 'data_json');
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
