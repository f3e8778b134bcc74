/**
 * Capacity: the D1 bytes one email takes, by table and index, and so the emails a GB (and a
 * workspace's 10 GB database) holds. Two sets go through the whole path (Dovecot, the gateway, the
 * changes endpoint, the account object, D1) on a fresh store:
 *  1. the real-world corpus (test/fixtures corpus and bounces, as test/worker/corpus-sync.test.ts);
 *  2. newsletter-like HTML mail (newsletters.ts: text plus table layout with inline styles, under
 *     real header blocks), BENCH_CAPACITY_NEWSLETTERS messages (400), generated deterministically.
 * Sizes are SQLite's own page accounting (`dbstat`: every page of every table and index, free space
 * in them included) of the local D1 database file, which is the database D1 stores: measured before
 * and after each set once its events were fanned out, divided by the emails it added.
 * BENCH_CAPACITY_KEEP=<file> keeps a copy of the measured database there (VACUUM INTO) to look into.
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { cpus } from 'node:os';
import type { ImapFlow } from 'imapflow';
import { openImap } from '../mailserver/client.ts';
import { startMailServer } from '../mailserver/mailserver.ts';
import { connectMailbox } from '../node/connect.ts';
import { eventually, startService, type Service } from '../node/service.ts';
import { readFileSync } from 'node:fs';
import { newsletterSet } from './newsletters.ts';

const NEWSLETTERS = Number(process.env.BENCH_CAPACITY_NEWSLETTERS ?? 400);
const CORPORA = ['test/fixtures/corpus', 'test/fixtures/bounces'];
const GATEWAY_ID = 'bench-capacity-gw';
/** Cloudflare's limit for one D1 database. */
const DATABASE_BYTES = 10e9;

function corpusFiles(): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (!/\.(json|md)$/i.test(name)) out.push(path);
    }
  };
  for (const dir of CORPORA) walk(dir);
  return out;
}

type Sizes = Map<string, number>;

/** Bytes of every table and index of the account's database (pages, free space in them included), by name. */
function sizes(service: Service, accountId: string): Sizes {
  const rows = service.mailQuery<{ name: string; bytes: number }>(
    accountId,
    'SELECT name, SUM(pgsize) AS bytes FROM dbstat GROUP BY name',
  );
  return new Map(rows.map((r) => [r.name, r.bytes]));
}

/** What an object is, for grouping: the table an index or FTS shadow table belongs to. */
function owners(service: Service): Map<string, string> {
  const rows = service.query<{ name: string; tbl_name: string }>('SELECT name, tbl_name FROM sqlite_schema');
  const out = new Map(rows.map((r) => [r.name, r.tbl_name]));
  for (const name of out.keys()) if (name.startsWith('emails_fts_')) out.set(name, 'emails_fts');
  return out;
}

async function fill(imap: ImapFlow, messages: Buffer[]): Promise<void> {
  for (let i = 0; i < messages.length; i += 100)
    await Promise.all(messages.slice(i, i + 100).map((m) => imap.append('INBOX', m, [])));
}

/** Syncs the messages into the account and returns the growth of every table and index. */
async function measure(
  service: Service,
  caFile: string,
  user: string,
  accountId: string,
  messages: Buffer[],
  mail: Parameters<typeof openImap>[0],
): Promise<{ count: number; growth: Sizes; accountId: string }> {
  const before = sizes(service, accountId);
  const imap = await openImap(mail, user);
  await fill(imap, messages);
  await imap.logout();
  const gateway = service.startGateway(GATEWAY_ID, { NODE_EXTRA_CA_CERTS: caFile });
  const count = () =>
    service.mailQuery<{ n: number }>(accountId, 'SELECT COUNT(*) AS n FROM emails WHERE account_id = ?', accountId)[0]
      ?.n ?? 0;
  await eventually(async () => count() >= messages.length, {
    what: `${messages.length} emails of ${user}`,
    timeoutMs: 600_000,
    intervalMs: 200,
  });
  await eventually(
    async () =>
      service
        .queryEach<{ n: number }>('SELECT COUNT(*) AS n FROM events WHERE fanned_out_at IS NULL')
        .every((d) => d.rows[0]?.n === 0),
    { what: 'every event fanned out', timeoutMs: 120_000, intervalMs: 200 },
  );
  await gateway.kill('SIGTERM');
  const after = sizes(service, accountId);
  const growth: Sizes = new Map();
  for (const [name, bytes] of after) growth.set(name, bytes - (before.get(name) ?? 0));
  return { count: count(), growth, accountId };
}

const kb = (bytes: number) => `${(bytes / 1000).toFixed(2)} KB`;

/** Average bytes of each column's values in the account's rows (the record's payload, before page overhead). */
function columnBytes(service: Service, table: string, accountId: string): [string, number][] {
  const columns = service.query<{ name: string }>(`SELECT name FROM pragma_table_info('${table}')`).map((c) => c.name);
  const sums = columns.map((c) => `AVG(COALESCE(length(CAST("${c}" AS BLOB)), 0)) AS "${c}"`).join(', ');
  const [row] = service.mailQuery<Record<string, number>>(
    accountId,
    `SELECT ${sums} FROM ${table} WHERE account_id = ?`,
    accountId,
  );
  return Object.entries(row ?? {})
    .filter(([, v]) => v >= 20)
    .sort((a, b) => b[1] - a[1]);
}

function report(
  service: Service,
  label: string,
  input: Buffer[],
  run: { count: number; growth: Sizes; accountId: string },
  owner: Map<string, string>,
) {
  const { count, growth } = run;
  const avg = input.reduce((n, m) => n + m.length, 0) / input.length;
  const total = [...growth.values()].reduce((a, b) => a + b, 0);
  console.log(`\n-- ${label}: ${count} emails, ${kb(avg)} average message --`);
  const byTable = new Map<string, number>();
  for (const [name, bytes] of growth) {
    const table = owner.get(name) ?? name;
    byTable.set(table, (byTable.get(table) ?? 0) + bytes);
  }
  const tables = [...byTable].filter(([, b]) => b !== 0).sort((a, b) => b[1] - a[1]);
  for (const [table, bytes] of tables) {
    console.log(`  ${table.padEnd(24)} ${kb(bytes / count).padStart(10)} per email`);
    const parts = [...growth].filter(([n, b]) => b !== 0 && (owner.get(n) ?? n) === table && n !== table);
    for (const [name, b] of parts.sort((x, y) => y[1] - x[1]))
      console.log(`    ${name.padEnd(36)} ${kb(b / count).padStart(10)}`);
  }
  for (const table of ['emails', 'events']) {
    const columns = columnBytes(service, table, run.accountId).map(([c, v]) => `${c} ${v.toFixed(0)}`);
    console.log(`  ${table} columns, average bytes per row (20 and more): ${columns.join(', ')}`);
    const [pages] = service.mailQuery<{ pages: number; used: number; overflow: number }>(
      run.accountId,
      `SELECT COUNT(*) AS pages, 1.0 * SUM(pgsize - unused) / SUM(pgsize) AS used,
              SUM(pagetype = 'overflow') AS overflow FROM dbstat WHERE name = ?`,
      table,
    );
    console.log(
      `  ${table} table (whole database): ${pages?.pages} pages, ${((pages?.used ?? 0) * 100).toFixed(0)} % used, ${pages?.overflow} overflow pages`,
    );
  }
  const perEmail = total / count;
  console.log(`  ${'total'.padEnd(24)} ${kb(perEmail).padStart(10)} per email`);
  console.log(
    `  emails per GB: ${Math.floor(1e9 / perEmail).toLocaleString('en')}; per 10 GB database: ${Math.floor(DATABASE_BYTES / perEmail).toLocaleString('en')}`,
  );
  // The outbox keeps an event and its webhook calls 30 days: a mailbox's older mail holds none.
  const outbox = (byTable.get('events') ?? 0) + (byTable.get('webhook_conversations') ?? 0);
  const kept = (total - outbox) / count;
  console.log(
    `  ${"after the outbox's 30 days".padEnd(24)} ${kb(kept).padStart(10)} per email; per 10 GB database: ${Math.floor(DATABASE_BYTES / kept).toLocaleString('en')}`,
  );
  return perEmail;
}

export async function run(): Promise<void> {
  console.log(
    `${new Date().toISOString()}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, sizes from dbstat (1 KB = 1,000 bytes)`,
  );
  const files = corpusFiles();
  const corpus = files.map((f) => readFileSync(f));
  const newsletters = newsletterSet(files, NEWSLETTERS);
  const mail = await startMailServer();
  const service = await startService();
  try {
    const gateway = service.startGateway(GATEWAY_ID, { NODE_EXTRA_CA_CERTS: mail.caFile });
    const alice = await connectMailbox(service, mail.info(), 'alice');
    const bob = await connectMailbox(service, mail.info(), 'bob');
    await gateway.kill('SIGTERM');
    const owner = owners(service);
    const realWorld = await measure(service, mail.caFile, 'alice', alice.id, corpus, mail.info());
    report(service, 'real-world corpus', corpus, realWorld, owner);
    const html = await measure(service, mail.caFile, 'bob', bob.id, newsletters, mail.info());
    report(service, 'newsletter-like HTML mail', newsletters, html, owner);
    const keep = process.env.BENCH_CAPACITY_KEEP;
    if (keep) service.mailQuery(alice.id, 'VACUUM INTO ?', keep);
  } finally {
    await service.stop();
    await mail.stop();
  }
}
