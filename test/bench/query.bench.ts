/**
 * List query latency: GET /emails with four filters, limit 100, over 100,000 emails in
 * the local D1 database, p50/p99 over real HTTP; beside it the very same SQL (statement text and
 * parameters from worker/emails/query.ts's buildEmailQuery, fed the same query strings) run directly
 * on the D1 SQLite file with node:sqlite: the floor, what the database alone costs.
 *
 * The emails are written (query-mailbox.ts) straight into the SQLite file wrangler dev uses for
 * local D1, while the Worker has not yet opened it (one transaction, prepared statements, rows shaped
 * like worker/sync/apply.ts writes them, search index included); the API then lists them, which is
 * checked before anything is timed. Measured as shipped (no ANALYZE, as D1 has none by default),
 * then once more after ANALYZE for comparison. Nothing here asserts on time.
 */
import { DatabaseSync } from 'node:sqlite';
import { startService, type Service } from '../node/service.ts';
import { ACCOUNTS, DAY, d1File, load } from './query-mailbox.ts';

/**
 * The Worker's own query builder, loaded at run time: Node 24 runs worker/emails/query.ts as it is,
 * but the Node TypeScript project cannot type-check Worker files (D1 and Web Crypto types come from
 * @cloudflare/workers-types there), so the import is not a literal tsc would follow; this is the
 * part of its shape used here.
 */
interface QueryModule {
  EmailListQuery: { parse(input: Record<string, string>): { limit: number } };
  buildEmailQuery(q: { limit: number }): { sql: string; params: (string | number)[]; empty: boolean };
}
const QUERY_MODULE = '../../worker/emails/query.ts';
const { buildEmailQuery, EmailListQuery } = (await import(QUERY_MODULE)) as QueryModule;

const ITERATIONS = Number(process.env.BENCH_QUERY_ITERATIONS ?? 200);
const WARMUP = 20;

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
interface Stats {
  p50: number;
  p99: number;
  mean: number;
}
const stats = (values: number[]): Stats => {
  const s = [...values].sort((a, b) => a - b);
  return { p50: percentile(s, 50), p99: percentile(s, 99), mean: s.reduce((a, b) => a + b, 0) / s.length };
};
const ms = (v: number) => `${v.toFixed(2)} ms`;

/** One benchmarked listing: how to build the i-th request's query string, with the cursor of the previous page when wanted. */
interface Scenario {
  label: string;
  query: (i: number) => Record<string, string>;
  /** Follow the previous response's cursor on this request (keyset path) instead of starting at page one. */
  followCursor: (i: number) => boolean;
}

interface Timed {
  http: number[];
  /** The exact query strings sent (cursors included), replayed against the SQLite file. */
  queries: string[];
  rows: number[];
}

async function timeHttp(service: Service, scenario: Scenario): Promise<Timed> {
  const out: Timed = { http: [], queries: [], rows: [] };
  let cursor: string | null = null;
  for (let i = -WARMUP; i < ITERATIONS; i++) {
    const params = new URLSearchParams({ ...scenario.query(i), limit: '100' });
    if (scenario.followCursor(i) && cursor) params.set('cursor', cursor);
    const qs = params.toString();
    const t0 = performance.now();
    const response = await fetch(`${service.base}/api/v1/emails?${qs}`, { headers: { 'X-API-KEY': service.adminKey } });
    const text = await response.text();
    const elapsed = performance.now() - t0;
    if (response.status !== 200)
      throw new Error(`${scenario.label}: GET /emails?${qs} answered ${response.status}: ${text.slice(0, 300)}`);
    const body = JSON.parse(text) as { data: unknown[]; cursor: string | null };
    cursor = body.cursor;
    if (i < 0) continue;
    out.http.push(elapsed);
    out.queries.push(qs);
    out.rows.push(body.data.length);
  }
  return out;
}

/** The statement GET /emails runs for `qs`: the route's own parsing and query builder. */
function statementFor(qs: string): { sql: string; params: (string | number)[] } {
  const built = buildEmailQuery(EmailListQuery.parse(Object.fromEntries(new URLSearchParams(qs))));
  if (built.empty) throw new Error(`query ${qs} finds nothing by construction`);
  return built;
}

function timeDirect(db: DatabaseSync, queries: string[]): number[] {
  const statements = queries.map(statementFor);
  for (const s of statements.slice(0, WARMUP)) db.prepare(s.sql).all(...s.params);
  return statements.map((s) => {
    const t0 = performance.now();
    db.prepare(s.sql).all(...s.params);
    return performance.now() - t0;
  });
}

function plan(db: DatabaseSync, qs: string): string[] {
  const s = statementFor(qs);
  return (db.prepare(`EXPLAIN QUERY PLAN ${s.sql}`).all(...s.params) as { detail: string }[]).map((r) => r.detail);
}

async function measure(service: Service, db: DatabaseSync, scenarios: Scenario[], heading: string): Promise<void> {
  console.log(`\n-- ${heading} --`);
  for (const scenario of scenarios) {
    const timed = await timeHttp(service, scenario);
    const direct = timeDirect(db, timed.queries);
    const h = stats(timed.http);
    const d = stats(direct);
    const cursorPages = timed.queries.filter((q) => q.includes('cursor=')).length;
    const meanRows = timed.rows.reduce((a, b) => a + b, 0) / timed.rows.length;
    console.log(
      `${scenario.label}  (${ITERATIONS} requests after ${WARMUP} warm-up, ${cursorPages} with a cursor, ${meanRows.toFixed(1)} emails/page on average)`,
    );
    console.log(`  HTTP GET /emails (Worker + D1): p50 ${ms(h.p50)}, p99 ${ms(h.p99)}, mean ${ms(h.mean)}`);
    console.log(`  same SQL on the SQLite file:    p50 ${ms(d.p50)}, p99 ${ms(d.p99)}, mean ${ms(d.mean)}`);
    console.log(
      `  ratio HTTP/direct:              p50 ${(h.p50 / d.p50).toFixed(1)}x, p99 ${(h.p99 / d.p99).toFixed(1)}x`,
    );
    console.log(
      `  plan (first page): ${plan(db, timed.queries.find((q) => !q.includes('cursor=')) ?? timed.queries[0]!).join(' | ')}`,
    );
  }
}

export async function run(): Promise<void> {
  const service = await startService();
  try {
    // The Worker has not touched D1 yet (only `GET /` was asked for): write the mailbox now.
    const fixture = load(d1File(service));
    const c = fixture.counts;
    const pct = (n: number) => `${((100 * n) / c.emails).toFixed(1)}%`;
    console.log(
      `loaded ${c.emails} emails into local D1 in ${fixture.loadSeconds.toFixed(1)} s: ${fixture.accounts.length} accounts, ` +
        `${c.memberships} folder memberships, ${c.participants} participants, unread ${pct(c.unread)}, starred ${pct(c.starred)}, ` +
        `with attachments ${pct(c.attachments)}, ${fixture.senders.length} senders`,
    );

    // The Worker must see them: count every account's emails through the API before timing anything.
    const listed = await service.api<{ data: unknown[] }>(
      'GET',
      `/emails?account_id=${fixture.accounts[0]!.id}&limit=250`,
    );
    if (listed.status !== 200 || listed.body.data.length !== 250) {
      throw new Error(
        `the Worker does not see the loaded emails: ${listed.status} ${JSON.stringify(listed.body).slice(0, 300)}`,
      );
    }
    console.log(`the API lists them (a first page of ${listed.body.data.length})`);

    const db = new DatabaseSync(fixture.file, { readOnly: true });
    const accountOf = (i: number) => fixture.accounts[((i % ACCOUNTS) + ACCOUNTS) % ACCOUNTS]!.id;
    // Pages: each account's first page, then its second through the cursor (cursors belong to one account).
    const cursorEveryOther = (i: number) => ((i % 2) + 2) % 2 === 1;
    const after = new Date(Date.now() - 180 * DAY).toISOString();
    const terms = ['invoice', 'meeting budget', 'security', 'contract renewal', 'roadmap'];
    const scenarios: Scenario[] = [
      {
        label: 'account_id + folder=INBOX + unread=true, limit 100',
        query: (i) => ({ account_id: accountOf(Math.floor(i / 2)), folder: 'INBOX', unread: 'true' }),
        followCursor: cursorEveryOther,
      },
      {
        label: 'from= + after= (last 180 days) + has_attachments=true, limit 100',
        query: (i) => ({
          from: fixture.senders[(((Math.floor(i / 2) % 10) + 10) % 10) * 3]!,
          after,
          has_attachments: 'true',
        }),
        followCursor: cursorEveryOther,
      },
      {
        // Through the participant rows: a sender every account hears from, a few who write often.
        label: 'any_email= + account_id, limit 100',
        query: (i) => ({
          account_id: accountOf(Math.floor(i / 2)),
          any_email: fixture.senders[(((Math.floor(i / 2) % 10) + 10) % 10) * 3]!,
        }),
        followCursor: cursorEveryOther,
      },
      {
        label: 'q= (full-text) + account_id, limit 100',
        query: (i) => ({
          account_id: accountOf(Math.floor(i / 2)),
          q: terms[((Math.floor(i / 2) % terms.length) + terms.length) % terms.length]!,
        }),
        followCursor: cursorEveryOther,
      },
    ];

    await measure(service, db, scenarios, 'as shipped (no ANALYZE; D1 runs none by default)');

    // For comparison only: the planner with statistics. ANALYZE writes sqlite_stat1, which the
    // Worker's connection picks up (schema change) on its next statement.
    db.close();
    const rw = new DatabaseSync(fixture.file);
    const a0 = performance.now();
    rw.exec('ANALYZE');
    rw.close();
    console.log(`\nANALYZE took ${((performance.now() - a0) / 1000).toFixed(1)} s`);
    const analyzed = new DatabaseSync(fixture.file, { readOnly: true });
    try {
      await measure(service, analyzed, scenarios, 'after ANALYZE (not what ships)');
    } finally {
      analyzed.close();
    }
  } finally {
    await service.stop();
  }
}
