/**
 * Set-based D1 writes: many rows in one statement. The rows travel as one bound JSON array (each
 * row an array of column values) expanded with `json_each`, so a statement has one or two bound
 * parameters whatever it writes (D1 allows 100), and its JSON stays far below D1's 2 MB per value.
 */
import type { OutboxEvent } from '../events/outbox.ts';
import { jsonChunks, jsonColumns } from '../lib/sql.ts';

/** INSERT (OR IGNORE) of rows into a table: one statement per JSON chunk. */
export function insertRows(
  db: D1Database,
  table: string,
  columns: readonly string[],
  rows: unknown[][],
  { orIgnore = false }: { orIgnore?: boolean } = {},
): D1PreparedStatement[] {
  if (rows.length === 0) return [];
  const sql = `INSERT ${orIgnore ? 'OR IGNORE ' : ''}INTO ${table} (${columns.join(', ')})
    SELECT ${jsonColumns(columns)} FROM json_each(?)`;
  return jsonChunks(rows).map((json) => db.prepare(sql).bind(json));
}

const EVENT_COLUMNS = ['id', 'type', 'account_id', 'data_json', 'created_at'] as const;

/** Outbox rows of events, in their order (the feed orders by insertion). */
export function eventRows(db: D1Database, events: OutboxEvent[]): D1PreparedStatement[] {
  return insertRows(
    db,
    'events',
    EVENT_COLUMNS,
    events.map((e) => [e.id, e.type, e.account_id, JSON.stringify(e.data), e.created_at]),
  );
}

/**
 * UPDATE of many rows by key, from JSON: `set` names the columns taken from the rows (after the key
 * columns), `extra` adds fixed assignments (`updated_at = ?2`).
 */
export function updateRows(
  db: D1Database,
  table: string,
  keys: readonly string[],
  set: readonly string[],
  rows: unknown[][],
  extra: { sql: string; params: unknown[] } = { sql: '', params: [] },
): D1PreparedStatement[] {
  if (rows.length === 0) return [];
  const assignments = [...set.map((c) => `${c} = j.${c}`), ...(extra.sql ? [extra.sql] : [])].join(', ');
  const match = keys.map((k) => `${table}.${k} = j.${k}`).join(' AND ');
  const sql = `UPDATE ${table} SET ${assignments}
    FROM (SELECT ${jsonColumns([...keys, ...set])} FROM json_each(?1)) AS j WHERE ${match}`;
  return jsonChunks(rows).map((json) => db.prepare(sql).bind(json, ...extra.params));
}
