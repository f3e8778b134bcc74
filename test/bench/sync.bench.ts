/**
 * Sync throughput. Two runs, each: messages arrive in a connected mailbox while its gateway is
 * stopped; a gateway is started and we time until D1 holds them all (then the API is asked).
 *  1. 10,000 small messages (BENCH_SYNC_COUNT), beside the raw rate at which a plain imapflow
 *     client fetches the same messages (source, flags, date, size) from the same Dovecot: the floor.
 *  2. A real-world mix: the test corpora (test/fixtures, with attachments) BENCH_SYNC_MIX_COPIES times.
 * Each prints msg/s (and MB/s), and where the time and the Cloudflare operations go: summed from
 * the account object's `sync stats` lines and the gateway's `relay changes` lines (debug level).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { ImapFlow } from 'imapflow';
import { openImap } from '../mailserver/client.ts';
import { startMailServer } from '../mailserver/mailserver.ts';
import { connectMailbox } from '../node/connect.ts';
import { eventually, startService, type Service } from '../node/service.ts';

const COUNT = Number(process.env.BENCH_SYNC_COUNT ?? 10_000);
const MIX_COPIES = Number(process.env.BENCH_SYNC_MIX_COPIES ?? 4);
const CORPORA = ['test/fixtures/corpus', 'test/fixtures/bounces'];
/** One gateway id throughout: a restarted gateway holds its accounts' leases again at once. */
const GATEWAY_ID = 'bench-gw';

function smallMessage(i: number): Buffer {
  return Buffer.from(
    [
      `From: Bench Sender <sender${i % 50}@remote.test>`,
      'To: alice@example.test',
      `Subject: bench message ${i}`,
      `Date: ${new Date(Date.now() - (COUNT - i) * 1000).toUTCString()}`,
      `Message-ID: <bench-${i}-${Date.now()}@remote.test>`,
      'MIME-Version: 1.0',
      'Content-Type: text/plain; charset=utf-8',
      '',
      `Body of message ${i}. `.repeat(40),
      '',
    ].join('\r\n'),
  );
}

function corpusFiles(): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (!/\.(json|md)$/i.test(name) && !/^(readme|licen[cs]e)/i.test(name)) out.push(path);
    }
  };
  for (const dir of CORPORA) walk(dir);
  return out.sort();
}

/** The mix: every corpus message MIX_COPIES times, each copy made distinct by one header. */
function mixMessages(): Buffer[] {
  const files = corpusFiles().map((f) => readFileSync(f));
  const out: Buffer[] = [];
  for (let copy = 0; copy < MIX_COPIES; copy++)
    for (const [i, bytes] of files.entries())
      out.push(Buffer.concat([Buffer.from(`X-Bench-Copy: ${copy}-${i}\r\n`), bytes]));
  return out;
}

async function fill(imap: ImapFlow, messages: Buffer[]): Promise<void> {
  for (let i = 0; i < messages.length; i += 200)
    await Promise.all(messages.slice(i, i + 200).map((m) => imap.append('INBOX', m, [])));
}

async function rawFetchRate(imap: ImapFlow): Promise<number> {
  await imap.mailboxOpen('INBOX');
  const start = performance.now();
  let fetched = 0;
  for await (const msg of imap.fetch('1:*', { uid: true, flags: true, internalDate: true, size: true, source: true }))
    if (msg.source) fetched++;
  await imap.mailboxClose();
  return fetched / ((performance.now() - start) / 1000);
}

type Numbers = Record<string, number>;

function sumLines(lines: string[], pattern: RegExp): Numbers {
  const sum: Numbers = { batches: 0 };
  for (const line of lines) {
    const match = pattern.exec(line);
    if (!match) continue;
    sum.batches! += 1;
    for (const [k, v] of Object.entries(JSON.parse(match[1]!) as Record<string, unknown>))
      if (typeof v === 'number') sum[k] = (sum[k] ?? 0) + v;
  }
  return sum;
}

interface Run {
  label: string;
  startupSeconds: number;
  count: number;
  bytes: number;
  seconds: number;
  worker: Numbers;
  /** The changes endpoint's parsing, before the object (`sync prepare` lines). */
  prepare: Numbers;
  relay: Numbers;
}

/** Starts a gateway for the account and waits until D1 holds `count` emails of it. */
async function syncRun(
  service: Service,
  caFile: string,
  accountId: string,
  label: string,
  count: number,
  bytes: number,
) {
  service.workerLog.length = 0;
  const start = performance.now();
  const startWall = Date.now();
  const gateway = service.startGateway(GATEWAY_ID, { NODE_EXTRA_CA_CERTS: caFile, GATEWAY_LOG_LEVEL: 'debug' });
  await eventually(
    async () =>
      (service.mailQuery<{ n: number }>(
        accountId,
        'SELECT COUNT(*) AS n FROM emails WHERE account_id = ?',
        accountId,
      )[0]?.n ?? 0) >= count,
    { what: `${count} emails in D1`, timeoutMs: 1_800_000, intervalMs: 100 },
  );
  const seconds = (performance.now() - start) / 1000;
  const listed = (await service.api('GET', `/emails?account_id=${accountId}&limit=1`)).body.data.length;
  if (listed !== 1) throw new Error('the API does not list the synced mail');
  await gateway.kill('SIGTERM');
  // Until the gateway sent its first change: process start, IMAP login, lease, listing, first fetch.
  const first = gateway.log.find((l) => l.includes('"relay changes"'));
  const firstSent = first ? Date.parse(JSON.parse(first).time) - (JSON.parse(first).round_trip_ms ?? 0) - startWall : 0;
  const run: Run = {
    startupSeconds: firstSent / 1000,
    label,
    count,
    bytes,
    seconds,
    worker: sumLines(service.workerLog, /sync stats (\{.*\})/),
    prepare: sumLines(service.workerLog, /sync prepare (\{.*\})/),
    relay: sumLines(
      gateway.log.filter((l) => l.includes('"relay changes"')),
      /^(\{.*\})$/,
    ),
  };
  return run;
}

function report(run: Run, rawRate?: number): void {
  const { worker: w, prepare: p, relay: r, count } = run;
  const rate = count / run.seconds;
  const perMsg = (ms: number | undefined) => `${(((ms ?? 0) / count) * 1000).toFixed(0)} µs`;
  console.log(`\n-- ${run.label}: ${count} messages, ${(run.bytes / 1e6).toFixed(1)} MB --`);
  if (rawRate) console.log(`raw imapflow fetch: ${rawRate.toFixed(0)} msg/s`);
  console.log(
    `sync into the API:  ${run.seconds.toFixed(2)} s = ${rate.toFixed(0)} msg/s, ${(run.bytes / 1e6 / run.seconds).toFixed(2)} MB/s`,
  );
  if (rawRate) console.log(`ratio sync/raw: ${(rate / rawRate).toFixed(3)}`);
  const steady = count / (run.seconds - run.startupSeconds);
  console.log(
    `  of which ${run.startupSeconds.toFixed(2)} s until the first change was sent (gateway start, login, lease, listing, first fetch); after it ${steady.toFixed(0)} msg/s${rawRate ? ` (ratio ${(steady / rawRate).toFixed(3)})` : ''}`,
  );
  console.log(
    `changes: ${w.batches} applied batches, ${(count / Math.max(1, w.batches ?? 1)).toFixed(0)} messages each on average`,
  );
  const onTheWay = (r.round_trip_ms ?? 0) - (w.applyMs ?? 0);
  console.log(
    'per message (wall time of each stage; the gateway fetches while two batches are on their way, and the object applies one at a time):',
  );
  if (rawRate) console.log(`  gateway fetch (raw rate)  ${((1 / rawRate) * 1e6).toFixed(0)} µs`);
  console.log(`  relay encoding (JSON)     ${perMsg(r.encode_ms)}`);
  console.log(`  transfer + waiting for the batch before (round trip - own apply) ${perMsg(onTheWay)}`);
  console.log(`    of which parsing in the changes request, before the object ${perMsg(p.parseMs)}`);
  console.log(
    `  worker apply, total       ${perMsg(w.applyMs)} (the bound: ${(1e6 / (((w.applyMs ?? 0) / count) * 1000)).toFixed(0)} msg/s)`,
  );
  console.log(`    parse (staged sources)  ${perMsg(w.parseMs)}`);
  console.log(`    lookups                 ${perMsg(w.lookupMs)}`);
  console.log(`    rows, threads, segment  ${perMsg(w.buildMs)}`);
  console.log(`    R2                      ${perMsg(w.r2Ms)}`);
  console.log(`    D1 batches              ${perMsg(w.d1Ms)}`);
  const created = Math.max(1, w.created ?? 0);
  console.log(
    `D1 statements per new message: ${((w.d1Statements ?? 0) / created).toFixed(3)} (rows written: ${((w.d1RowsWritten ?? 0) / created).toFixed(1)})`,
  );
  console.log(`R2 operations per new message: ${((w.r2Ops ?? 0) / created).toFixed(4)}`);
}

export async function run(): Promise<void> {
  const mail = await startMailServer();
  const service = await startService();
  try {
    // Both accounts connect (and their gateway stops) before their mail arrives: all of it is new mail.
    const gateway = service.startGateway(GATEWAY_ID, { NODE_EXTRA_CA_CERTS: mail.caFile });
    const small = await connectMailbox(service, mail.info(), 'alice');
    const mixed = await connectMailbox(service, mail.info(), 'bob');
    await gateway.kill('SIGTERM');

    const smallMessages = Array.from({ length: COUNT }, (_, i) => smallMessage(i));
    const imap = await openImap(mail.info(), 'alice');
    const t0 = performance.now();
    await fill(imap, smallMessages);
    console.log(`filled alice's INBOX with ${COUNT} messages in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    const rawRate = await rawFetchRate(imap);
    await imap.logout();
    const bytes = smallMessages.reduce((n, m) => n + m.length, 0);
    report(await syncRun(service, mail.caFile, small.id, 'small messages', COUNT, bytes), rawRate);

    const mix = mixMessages();
    const bob = await openImap(mail.info(), 'bob');
    await fill(bob, mix);
    const mixRaw = await rawFetchRate(bob);
    await bob.logout();
    const mixBytes = mix.reduce((n, m) => n + m.length, 0);
    report(await syncRun(service, mail.caFile, mixed.id, 'real-world mix', mix.length, mixBytes), mixRaw);
  } finally {
    await service.stop();
    await mail.stop();
  }
}
