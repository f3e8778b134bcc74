/**
 * Set-based D1 writes: many rows in one statement. The rows travel as one bound JSON array (each
 * row an array of column values) expanded with `json_each`, so a statement has one or two bound
 * parameters whatever it writes (D1 allows 100), and its JSON stays far below D1's 2 MB per value.
 */
import { dataJson, type OutboxEvent } from '../events/outbox.ts';
import { jsonChunks, jsonColumns, jsonTextChunks } from '../lib/sql.ts';

/** INSERT (OR IGNORE) of rows into a table: one statement per JSON chunk. */
export function insertRows(
  db: D1Database,
  table: string,
  columns: readonly string[],
  rows: unknown[][],
  {
    orIgnore = false,
    hex,
    extra = {},
  }: {
    orIgnore?: boolean;
    hex?: ReadonlySet<string>;
    /** Columns computed in SQL (over `json_each`'s `key` and `value`), by name. */
    extra?: Record<string, string>;
  } = {},
): D1PreparedStatement[] {
  if (rows.length === 0) return [];
  const computed = Object.entries(extra);
  const names = [...columns, ...computed.map(([name]) => name)].join(', ');
  const values = [jsonColumns(columns, 'value', hex), ...computed.map(([, sql]) => sql)].join(', ');
  const sql = `INSERT ${orIgnore ? 'OR IGNORE ' : ''}INTO ${table} (${names})
    SELECT ${values} FROM json_each(?)`;
  return jsonChunks(rows).map((json) => db.prepare(sql).bind(json));
}

/**
 * Outbox rows of events, in their order, numbered here from the feed's counter (the same numbers
 * the `events_number` trigger would give one by one; migration 0011 leaves numbered rows to us).
 */
export function eventRows(db: D1Database, events: OutboxEvent[]): D1PreparedStatement[] {
  // The data goes in as JSON, not as a string holding JSON: escaped once less on its way to D1, and
  // `->` gives its text back unchanged.
  const rows = events.map(
    (e) => `[${JSON.stringify([e.id, e.type, e.account_id, e.created_at]).slice(1, -1)},${dataJson(e.data)}]`,
  );
  return jsonTextChunks(rows).flatMap(({ json, count }) => [
    db
      .prepare(
        `INSERT INTO events (id, type, account_id, created_at, data_json, seq)
         SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'),
                json_extract(value, '$[3]'), value -> '$[4]',
                (SELECT last FROM event_sequence WHERE id = 1) + key + 1
         FROM json_each(?)`,
      )
      .bind(json),
    // The count is bound, not read back from the JSON (SQLite would parse the whole chunk again).
    db.prepare('UPDATE event_sequence SET last = last + ? WHERE id = 1').bind(count),
  ]);
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

/** DELETE of many rows by key, from JSON: one statement per JSON chunk. */
export function deleteRows(
  db: D1Database,
  table: string,
  keys: readonly string[],
  rows: unknown[][],
): D1PreparedStatement[] {
  if (rows.length === 0) return [];
  const sql = `DELETE FROM ${table} WHERE (${keys.join(', ')}) IN (SELECT ${jsonColumns(keys)} FROM json_each(?))`;
  return jsonChunks(rows).map((json) => db.prepare(sql).bind(json));
}
