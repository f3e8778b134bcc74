import { exports } from 'cloudflare:workers';

export const ADMIN_KEY = 'test-admin-key';

export interface ApiResponse<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

/** A request to the Worker's own fetch handler, as a client would send it. */
export async function api<T = any>(
  method: string,
  path: string,
  options: { key?: string | null; body?: unknown; rawBody?: BodyInit; headers?: Record<string, string> } = {},
): Promise<ApiResponse<T>> {
  const headers: Record<string, string> = { ...options.headers };
  const key = options.key === undefined ? ADMIN_KEY : options.key;
  if (key !== null) headers['X-API-KEY'] = key;
  let body: BodyInit | undefined = options.rawBody;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['Content-Type'] = 'application/json';
  }
  const response = await exports.default.fetch(`https://mail.example.com/api/v1${path}`, { method, headers, body });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return { status: response.status, body: parsed as T, headers: response.headers };
}

/** Asserts the spec's error shape and returns it. */
export function expectError(res: ApiResponse, status: number, type: string) {
  if (res.status !== status || res.body?.type !== `errors/${type}`) {
    throw new Error(`expected ${status} errors/${type}, got ${res.status} ${JSON.stringify(res.body)}`);
  }
  const keys = Object.keys(res.body).sort();
  if (keys.join(',') !== 'detail,status,title,type') throw new Error(`unexpected error shape ${keys}`);
  if (typeof res.body.detail !== 'string' || res.body.detail.length < 5) throw new Error('detail missing');
  return res.body as { status: number; type: string; title: string; detail: string };
}

/** A `SELECT COUNT(*) AS n …` in a database. */
export const countIn = async (db: D1Database, sql: string, ...params: unknown[]): Promise<number> =>
  (await db
    .prepare(sql)
    .bind(...params)
    .first<{ n: number }>())!.n;

/** Emails' numbers in use in a database (migrations/0036_email_numbers.sql). */
const LIVE_NUMBERS = 'SELECT num FROM emails WHERE num IS NOT NULL';

/**
 * Counts (?1: an account id) of the rows keyed by email number that belong to the account or to no
 * email at all: a deleted email's rows left behind count as the account's.
 */
export const NUMBERED_ROWS_OF_ACCOUNT: Record<string, string> = {
  account_numbers: 'SELECT COUNT(*) AS n FROM account_numbers WHERE account_id = ?1',
  participants: `SELECT COUNT(*) AS n FROM participants
    WHERE account_num IN (SELECT num FROM account_numbers WHERE account_id = ?1) OR num NOT IN (${LIVE_NUMBERS})`,
  thread_key_numbers: `SELECT COUNT(*) AS n FROM thread_key_numbers
    WHERE num IN (SELECT num FROM emails WHERE account_id = ?1) OR num NOT IN (${LIVE_NUMBERS})`,
  emails_fts: `SELECT COUNT(*) AS n FROM emails_fts WHERE rowid IN (SELECT num FROM emails WHERE account_id = ?1)
    OR (rowid NOT IN (${LIVE_NUMBERS}) AND rowid NOT IN (SELECT rowid FROM email_search))`,
};
