/**
 * List query latency: GET /emails with four filters, limit 100, over 100,000 emails in
 * the local D1 database, p50/p99 over real HTTP; beside it the very same SQL (statement text and
 * parameters from worker/emails/query.ts's buildEmailQuery, fed the same query strings) run directly
 * on the D1 SQLite file with node:sqlite: the floor, what the database alone costs.
 *
 * The emails are written straight into the SQLite file wrangler dev uses for local D1, while the
 * Worker has not yet opened it (one transaction, prepared statements, rows shaped like
 * worker/sync/apply.ts writes them, search index included); the API then lists them, which is
 * checked before anything is timed. Measured as shipped (no ANALYZE, as D1 has none by default),
 * then once more after ANALYZE for comparison. Nothing here asserts on time.
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { mainRole } from '../../worker/folders/present.ts';
import { newId } from '../../worker/lib/ids.ts';
import { d1FileName, d1Folder, DIRECTORY } from '../node/d1-files.ts';
import { startService, type Service } from '../node/service.ts';
import { prng } from '../shared/prng.ts';

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

const EMAILS = Number(process.env.BENCH_QUERY_EMAILS ?? 100_000);
const ITERATIONS = Number(process.env.BENCH_QUERY_ITERATIONS ?? 200);
const WARMUP = 20;
const ACCOUNTS = 5;
const SENDERS = 50;
const DAY = 86_400_000;

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

const TOPICS = [
  'invoice',
  'meeting',
  'report',
  'budget',
  'travel',
  'release',
  'contract',
  'hiring',
  'roadmap',
  'offsite',
  'newsletter',
  'security',
  'renewal',
  'feedback',
  'workshop',
  'delivery',
  'payment',
  'launch',
  'survey',
  'migration',
  'quarterly',
  'proposal',
  'schedule',
  'interview',
  'backup',
  'outage',
  'conference',
  'shipment',
  'reminder',
  'summary',
  'onboarding',
  'review',
  'planning',
  'webinar',
  'receipt',
  'license',
  'update',
  'question',
  'request',
  'agenda',
];
const WORDS = (
  'the a to and of for in on with about please let me know if you have any questions thanks regards attached ' +
  'find below see here our team next week tomorrow today friday monday call notes draft final version numbers ' +
  'customer project office server account order status time plan idea point issue change progress document ' +
  'would could should will can may need want think hope share send check confirm follow up quick note again'
).split(' ');
const FIRST = ['Alex', 'Sam', 'Maria', 'Chen', 'Priya', 'Jonas', 'Fatima', 'Luca', 'Ines', 'Kofi'];
const LAST = ['Smith', 'Garcia', 'Müller', 'Rossi', 'Nakamura'];
const FOLDERS = [
  { path: 'INBOX', role: 'INBOX', special: null, share: 0.55, unread: 0.45 },
  { path: 'Sent', role: 'SENT', special: '\\Sent', share: 0.15, unread: 0 },
  { path: 'Archive', role: 'ARCHIVE', special: '\\Archive', share: 0.25, unread: 0.15 },
  { path: 'Trash', role: 'TRASH', special: '\\Trash', share: 0.05, unread: 0.2 },
] as const;

interface Fixture {
  accounts: { id: string; email: string }[];
  senders: string[];
  file: string;
  counts: {
    emails: number;
    memberships: number;
    participants: number;
    unread: number;
    starred: number;
    attachments: number;
  };
  loadSeconds: number;
}

/** The directory's database file (DB), where the bench's accounts live whatever MAIL_SHARDS is. */
const d1File = (service: Service): string => join(d1Folder(service.stateDir), d1FileName(DIRECTORY));

/** 100,000 emails in ~5 accounts, written the way a sync writes them, in one transaction. */
function load(file: string): Fixture {
  const t0 = performance.now();
  const rand = prng(4);
  const pick = <T>(list: readonly T[]) => list[Math.floor(rand() * list.length)]!;
  const words = (n: number) => Array.from({ length: n }, () => pick(WORDS)).join(' ');
  const db = new DatabaseSync(file);
  const now = Date.now();
  const nowIso = new Date(now).toISOString();
  const senders = Array.from({ length: SENDERS }, (_, k) => `sender${k}@remote.test`);
  const senderName = (k: number) => `${FIRST[k % FIRST.length]} ${LAST[Math.floor(k / FIRST.length) % LAST.length]}`;
  const counts = { emails: 0, memberships: 0, participants: 0, unread: 0, starred: 0, attachments: 0 };
  const accounts: Fixture['accounts'] = [];

  const insert = (table: string, columns: string[], verb = 'INSERT') =>
    db.prepare(`${verb} INTO ${table} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`);
  const account = insert('accounts', [
    'id',
    'provider',
    'email',
    'display_name',
    'user_id',
    'imap_host',
    'imap_port',
    'imap_encryption',
    'smtp_host',
    'smtp_port',
    'smtp_encryption',
    'smtp_user',
    'credentials',
    'status',
    'initial_sync',
    'created_at',
    'connected_at',
    'updated_at',
  ]);
  const folder = insert('folders', [
    'id',
    'account_id',
    'provider_id',
    'name',
    'role',
    'parent_id',
    'delimiter',
    'total_count',
    'created_at',
    'updated_at',
  ]);
  const emailColumns = [
    'id',
    'account_id',
    'identity',
    'thread_id',
    'provider_id',
    'message_id',
    'in_reply_to',
    'references_json',
    'date',
    'date_ms',
    'subject',
    'snippet',
    'from_json',
    'to_json',
    'cc_json',
    'bcc_json',
    'reply_to_json',
    'from_address',
    'body_html',
    'body_plain',
    'body_key',
    'headers_json',
    'raw_key',
    'size',
    'has_attachments',
    'unread',
    'starred',
    'is_draft',
    'role',
    'origin',
    'tracking_id',
    'draft_id',
    'created_at',
    'updated_at',
    'num',
  ];
  const email = insert('emails', emailColumns);
  const membership = insert('email_folders', ['email_id', 'folder_id', 'account_id', 'uid']);
  const accountNumber = insert('account_numbers', ['account_id', 'num']);
  const participant = insert('participants', ['num', 'kind', 'address', 'account_num'], 'INSERT OR IGNORE');
  const attachment = insert('attachments', [
    'id',
    'email_id',
    'account_id',
    'name',
    'extension',
    'size',
    'mime',
    'cid',
    'inline',
    'blob_key',
  ]);
  const fts = insert('emails_fts', ['rowid', 'subject', 'body', 'participants']);
  const threadKey = insert('thread_keys', ['account_id', 'key', 'email_id'], 'INSERT OR IGNORE');
  const contact = insert('contacts', [
    'account_id',
    'identifier',
    'display_name',
    'emails_count',
    'last_email_at',
    'last_email_ms',
  ]);

  let emailNumber = 0;
  db.exec('BEGIN');
  try {
    for (let a = 0; a < ACCOUNTS; a++) {
      const accountId = newId('account', now - 400 * DAY + a);
      const address = `user${a}@example.test`;
      accounts.push({ id: accountId, email: address });
      accountNumber.run(accountId, a + 1);
      account.run(
        accountId,
        'imap',
        address,
        `User ${a}`,
        address,
        'imap.example.test',
        993,
        'SSL',
        'smtp.example.test',
        587,
        'STARTTLS',
        address,
        'bench-placeholder-not-decryptable',
        'running',
        'completed',
        nowIso,
        nowIso,
        nowIso,
      );
      const folderIds = FOLDERS.map((f) => {
        const id = newId('folder');
        folder.run(id, accountId, f.path, f.path, f.role, null, '/', 0, nowIso, nowIso);
        return id;
      });
      const uids = FOLDERS.map(() => 1);
      const contacts = new Map<number, { count: number; last: number }>();

      // Oldest first, so a reply can name an earlier message of the same mailbox.
      const perAccount = Math.floor(EMAILS / ACCOUNTS) + (a < EMAILS % ACCOUNTS ? 1 : 0);
      const dates = Array.from({ length: perAccount }, () => now - Math.floor(rand() * 365 * DAY)).sort(
        (x, y) => x - y,
      );
      const earlier: { messageId: string; threadId: string; subject: string }[] = [];
      for (const [i, dateMs] of dates.entries()) {
        const r = rand();
        let f = 0;
        for (let acc = FOLDERS[0]!.share; f < FOLDERS.length - 1 && r > acc; ) acc += FOLDERS[++f]!.share;
        const home = FOLDERS[f]!;
        // Skewed senders: a few write a lot, most rarely.
        const k = Math.floor(SENDERS * rand() ** 2);
        const outgoing = home.role === 'SENT';
        const from = outgoing ? { address, name: `User ${a}` } : { address: senders[k]!, name: senderName(k) };
        const to = outgoing ? [{ address: senders[k]!, name: senderName(k) }] : [{ address, name: `User ${a}` }];
        const cc = rand() < 0.1 ? [{ address: senders[(k + 7) % SENDERS]!, name: senderName((k + 7) % SENDERS) }] : [];

        const reply =
          earlier.length > 0 && rand() < 0.2
            ? earlier[Math.max(0, earlier.length - 1 - Math.floor(rand() * 200))]!
            : null;
        const subject = reply
          ? `Re: ${reply.subject.replace(/^Re: /, '')}`
          : `${pick(TOPICS)} ${pick(TOPICS)}: ${words(4)}`;
        const body = `Hi,\n\n${words(40 + Math.floor(rand() * 60))}.\n\n${from.name}`;
        const messageId = `<${createHash('sha1').update(`${a}-${i}`).digest('hex').slice(0, 20)}@${outgoing ? 'example.test' : 'remote.test'}>`;
        const threadId = reply ? reply.threadId : newId('thread', dateMs);
        const id = newId('email', dateMs);
        const identity = `mid:${createHash('sha256').update(`${messageId}\n${i}`).digest('hex')}`;
        const digest = createHash('sha256').update(`${accountId}\n${identity}`).digest('hex').slice(0, 40);
        const unread = rand() < home.unread ? 1 : 0;
        const starred = rand() < 0.05 ? 1 : 0;
        const hasAttachments = rand() < 0.1 ? 1 : 0;
        const folders = [f];
        if (home.role === 'INBOX' && rand() < 0.03) folders.push(2); // also copied to Archive
        const date = new Date(dateMs).toISOString();
        const headers = [
          { name: 'Return-Path', value: `<${from.address}>` },
          {
            name: 'Received',
            value: `from mx.remote.test by mail.example.test with ESMTPS; ${new Date(dateMs).toUTCString()}`,
          },
          { name: 'From', value: `${from.name} <${from.address}>` },
          { name: 'To', value: to.map((t) => `${t.name} <${t.address}>`).join(', ') },
          ...(cc.length ? [{ name: 'Cc', value: `${cc[0]!.name} <${cc[0]!.address}>` }] : []),
          { name: 'Subject', value: subject },
          { name: 'Date', value: new Date(dateMs).toUTCString() },
          { name: 'Message-ID', value: messageId },
          ...(reply
            ? [
                { name: 'In-Reply-To', value: reply.messageId },
                { name: 'References', value: reply.messageId },
              ]
            : []),
          { name: 'MIME-Version', value: '1.0' },
          {
            name: 'Content-Type',
            value: hasAttachments ? 'multipart/mixed; boundary="b1"' : 'multipart/alternative; boundary="b0"',
          },
        ];

        email.run(
          id,
          accountId,
          identity,
          threadId,
          null,
          messageId,
          reply?.messageId ?? null,
          JSON.stringify(reply ? [reply.messageId] : []),
          date,
          dateMs,
          subject,
          body.replace(/\s+/g, ' ').slice(0, 200),
          JSON.stringify(from),
          JSON.stringify(to),
          JSON.stringify(cc),
          '[]',
          '[]',
          from.address,
          `<div dir="ltr">${body.replace(/\n/g, '<br>')}</div>`,
          body,
          null,
          JSON.stringify(headers),
          `raw/${accountId}/${digest}.eml`,
          2_000 + body.length * 2 + hasAttachments * 50_000,
          hasAttachments,
          unread,
          starred,
          0,
          mainRole(folders.map((x) => FOLDERS[x]!.role)),
          'external',
          null,
          null,
          date,
          date,
          ++emailNumber,
        );
        for (const x of folders) {
          membership.run(id, folderIds[x]!, accountId, uids[x]!++);
          counts.memberships++;
        }
        for (const [kind, list] of [
          ['from', [from]],
          ['to', to],
          ['cc', cc],
        ] as const) {
          for (const p of list) {
            participant.run(emailNumber, kind, p.address, a + 1);
            counts.participants++;
          }
        }
        if (hasAttachments) {
          attachment.run(
            newId('attachment'),
            id,
            accountId,
            `${pick(TOPICS)}.pdf`,
            'pdf',
            48_000,
            'application/pdf',
            null,
            0,
            `att/${accountId}/${digest}/0`,
          );
        }
        fts.run(emailNumber, subject, body, [from, ...to, ...cc].map((p) => `${p.name} ${p.address}`).join(' '));
        threadKey.run(accountId, messageId, id);
        if (reply) threadKey.run(accountId, reply.messageId, id);
        const seen = contacts.get(k) ?? { count: 0, last: 0 };
        contacts.set(k, { count: seen.count + 1, last: Math.max(seen.last, dateMs) });
        earlier.push({ messageId, threadId, subject });
        counts.emails++;
        counts.unread += unread;
        counts.starred += starred;
        counts.attachments += hasAttachments;
      }
      for (const [k, c] of contacts)
        contact.run(accountId, senders[k]!, senderName(k), c.count, new Date(c.last).toISOString(), c.last);
      db.prepare(
        'UPDATE folders SET total_count = (SELECT COUNT(*) FROM email_folders ef WHERE ef.folder_id = folders.id) WHERE account_id = ?',
      ).run(accountId);
    }
    db.exec('COMMIT');
  } catch (err) {
    db.exec('ROLLBACK');
    throw err;
  } finally {
    db.close();
  }
  return { accounts, senders, file, counts, loadSeconds: (performance.now() - t0) / 1000 };
}

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
