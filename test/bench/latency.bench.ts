/**
 * New-mail latency on a full gateway: one gateway (started as `npm run gateway` starts it) holds N
 * accounts (BENCH_LATENCY_ACCOUNTS, a list, default "1,300,1000": the accounts are added step by
 * step, all but alice idle). At each step, after
 * the accounts settled (BENCH_LATENCY_SETTLE_MS), BENCH_LATENCY_COUNT isolated messages (default 30)
 * go to alice, one every BENCH_LATENCY_GAP_MS (default 5,000) plus a spread of 0–1 s, each timed
 * from Postfix accepting it to the subscriber receiving the signed `email.new`. The floor, measured
 * for the same message: when a plain imapflow client idling on the same INBOX hears of it. What we
 * own is the difference ("over the floor"). That client connects on the mail server's solo port, so
 * that no Dovecot process serves both it and the gateway's connection to INBOX: one process pushes
 * new mail to only one of its connections to a folder, the other hearing of it at its once-a-second
 * check (see test/mailserver/mailserver.ts). Both are told 500 ms after delivery (Dovecot's notify
 * delay), but on a busy machine two processes may tell them apart: the time over the gateway's own
 * notification (fetch + Worker + delivery) is printed too, and Postfix accepted → gateway notified,
 * which no floor moves. Dovecot also looks at an IDLE folder once a second
 * (mailbox_idle_check_interval); a look that comes right after a delivery tells that client at once,
 * 500 ms before the push. Were the messages exactly 5 s apart, the plain client's looks (it never
 * leaves IDLE) would keep their place against the deliveries and now and then tell it of one at once,
 * while the gateway is pushed as usual: 500 ms over the floor that are the floor's. So the gaps are
 * spread over a second, and the plain client's early hearings are counted.
 *
 * Per message, its stages, which add up to the time over the floor (the gateway's debug log, the
 * event's `created_at`, the account object's `sync stats`):
 *  - wake: the plain client notified → the gateway's IDLE connection notified (the same Dovecot);
 *  - fetch: notified → the change leaves for the Worker (STATUS, NOOP, FETCH, parse);
 *  - Worker: the change sent → the account's object made the event (route, parse, the object's
 *    apply up to the event: its `created_at`, the Worker's clock);
 *  - delivery: the event made → the subscriber has the webhook (commit, outbox, queue, fan-out, call);
 *  beside them the object's whole apply (`sync stats`) and the Worker's answer to the gateway (which
 *  may come after the webhook).
 * And what else ran: the gateway's event-loop delay (p50/p99/max, per 10 messages), and over a
 * window without mail (BENCH_LATENCY_IDLE_MS) what the idle accounts cost per minute: the gateway's
 * polls and calls to the Worker by call (its /metrics), the Worker's invocations by route, D1
 * statements, writing statements and rows written (the Worker's D1_METER totals), and the CPU the
 * machine's processes used by command name (the mail server, the gateway and workerd share it). Each step and
 * idle window is printed with the machine's load average. BENCH_LATENCY_GATEWAY_PROFILE=<folder>:
 * the gateway runs with `node --cpu-prof` and writes its CPU profile there when it stops.
 */
import { createServer } from 'node:http';
import { gatewayCommand } from '../../scripts/gateway-command.mjs';
import { readdirSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { deliver, openImap } from '../mailserver/client.ts';
import { DEFAULT_USERS, startMailServer, type MailServer } from '../mailserver/mailserver.ts';
import { connectMailbox } from '../node/connect.ts';
import { freePort } from '../node/helpers.ts';
import { eventually, startService, type Service } from '../node/service.ts';

const STEPS = (process.env.BENCH_LATENCY_ACCOUNTS ?? '1,300,1000').split(',').map(Number);
const COUNT = Number(process.env.BENCH_LATENCY_COUNT ?? 30);
const GAP_MS = Number(process.env.BENCH_LATENCY_GAP_MS ?? 5_000);
/** After accounts were added: their first passes, and their command connections closed (30 s unused). */
const SETTLE_MS = Number(process.env.BENCH_LATENCY_SETTLE_MS ?? 40_000);
/** Then a window without mail, for what the idle accounts cost per minute. */
const IDLE_MS = Number(process.env.BENCH_LATENCY_IDLE_MS ?? 60_000);
const CONNECT_CONCURRENCY = 8;
/**
 * Added to the gap before message i: 0–999 ms, evenly spread (golden-ratio steps), so that the
 * deliveries fall at every point of the mail server's once-a-second checks, not at one point.
 */
const spread = (i: number) => Math.floor(((i * 0.618034) % 1) * 1000);
/** A plain client told this soon after Postfix accepted the message heard of it before Dovecot's 500 ms notify delay. */
const EARLY_FLOOR_MS = 300;
/** A folder for the gateway's CPU profile (node --cpu-prof, written when it stops), if set. */
const PROFILE_DIR = process.env.BENCH_LATENCY_GATEWAY_PROFILE;
/** The machine's load: figures taken on a busy machine are read with it. */
const load = () =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');

/** Wall-clock ms: compared with the gateway's log times (another process). */
const now = () => Date.now();
const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
const ms = (v: number) => `${v.toFixed(0)}`;
function summary(label: string, values: number[]): string {
  if (!values.length) return `${label.padEnd(44)} (none)`;
  const s = [...values].sort((a, b) => a - b);
  return `${label.padEnd(44)} p50 ${ms(percentile(s, 50)).padStart(5)}  p90 ${ms(percentile(s, 90)).padStart(5)}  p99 ${ms(percentile(s, 99)).padStart(5)}  max ${ms(s[s.length - 1]!).padStart(5)} ms`;
}

/** Calls `onLine` for every line a service log array gets from now on. */
function tap(log: string[], onLine: (line: string, at: number) => void): void {
  const push = log.push.bind(log);
  log.push = (...lines: string[]) => {
    const at = now();
    for (const line of lines) onLine(line, at);
    return push(...lines);
  };
}

interface GatewayLine {
  msg?: string;
  time?: string;
  account?: string;
  path?: string;
  since_notify_ms?: number;
  round_trip_ms?: number;
  encode_ms?: number;
  messages?: number;
}

/** The account object's `sync stats` line (worker/sync/stats.ts): ms per stage of its apply. */
interface ApplyStats {
  applyMs: number;
  parseMs: number;
  lookupMs: number;
  buildMs: number;
  r2Ms: number;
  d1Ms: number;
}

interface MeterTotals {
  statements: number;
  writes: number;
  rows_written: number;
  invocations: Record<string, number>;
}

/** Prometheus text → sample name (with labels) → value. */
async function scrape(port: number): Promise<Map<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+(?:\{[^}]*\})?) ([0-9.e+-]+|NaN)$/.exec(line);
    if (m) out.set(m[1]!, Number(m[2]));
  }
  return out;
}

async function connectIdle(service: Service, mail: MailServer, users: string[]): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: CONNECT_CONCURRENCY }, async () => {
      while (next < users.length) await connectMailbox(service, mail.info(), users[next++]!);
    }),
  );
}

export async function run(): Promise<void> {
  const total = Math.max(...STEPS);
  const idleUsers = Array.from({ length: total - 1 }, (_, i) => `idle${String(i).padStart(4, '0')}`);
  const mail = await startMailServer({ users: [...DEFAULT_USERS, ...idleUsers], maxImapConnections: total * 3 + 200 });
  const service = await startService({ workerEnv: { D1_METER: 'true' } });
  /** Per subject: when the subscriber got it, and when the account's object made the event (its created_at). */
  const received = new Map<string, { at: number; madeAt: number }>();
  const subscriber = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const at = now();
      const event = JSON.parse(body) as { type: string; created_at: string; data: { subject?: string } };
      if (event.type === 'email.new' && event.data.subject)
        received.set(event.data.subject, { at, madeAt: Date.parse(event.created_at) });
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => subscriber.listen(0, '127.0.0.1', () => r()));
  const port = (subscriber.address() as { port: number }).port;
  try {
    const alice = mail.users.find((u) => u.user === 'alice')!;
    let meter: MeterTotals = { statements: 0, writes: 0, rows_written: 0, invocations: {} };
    const applies: ({ at: number } & ApplyStats)[] = [];
    tap(service.workerLog, (line, at) => {
      const d1 = /d1 meter (\{.*\})/.exec(line);
      if (d1) meter = JSON.parse(d1[1]!) as MeterTotals;
      const stats = /sync stats (\{.*\})/.exec(line);
      if (stats) applies.push({ at, ...(JSON.parse(stats[1]!) as ApplyStats) });
    });
    const metricsPort = await freePort();
    // Debug logging: per relayed pass, the time from IDLE notification to the Worker's acknowledgement.
    // As `npm run gateway` starts it (package.json: V8 flags, malloc settings), which decide how it collects garbage.
    const command = gatewayCommand(process.cwd());
    const gateway = service.startGateway(
      'bench-latency',
      {
        ...command.env,
        NODE_EXTRA_CA_CERTS: mail.caFile,
        GATEWAY_LOG_LEVEL: 'debug',
        GATEWAY_HTTP_PORT: String(metricsPort),
      },
      [
        ...command.args.slice(0, -1),
        ...(PROFILE_DIR ? ['--cpu-prof', '--cpu-prof-interval=2000', `--cpu-prof-dir=${PROFILE_DIR}`] : []),
      ],
    );
    const account = await connectMailbox(service, mail.info(), 'alice');
    const relayed: { at: number; sinceNotify: number }[] = [];
    const relays: { at: number; roundTrip: number; encode: number }[] = [];
    tap(gateway.log, (line) => {
      if (!line.startsWith('{')) return;
      const entry = JSON.parse(line) as GatewayLine;
      if (entry.account !== account.id || !entry.time) return;
      const at = Date.parse(entry.time);
      if (entry.msg === 'relayed new mail' && entry.path === 'INBOX')
        relayed.push({ at, sinceNotify: entry.since_notify_ms! });
      if (entry.msg === 'relay changes' && entry.messages)
        relays.push({ at, roundTrip: entry.round_trip_ms!, encode: entry.encode_ms! });
    });
    await service.api('POST', '/webhooks/endpoints', {
      url: `http://127.0.0.1:${port}/`,
      trigger_events: ['email.new'],
      account_ids: [account.id],
    });
    const idler = await openImap(mail.info(), 'alice', { soloPort: true });
    await idler.mailboxOpen('INBOX');
    let heard: (() => void) | null = null;
    idler.on('exists', () => heard?.());
    void idler.idle();

    let connected = 1;
    /** The median over the floor with alice alone (the first step): what more accounts add is compared with it. */
    let alone: number | null = null;
    for (const step of STEPS) {
      const t0 = now();
      await connectIdle(service, mail, idleUsers.slice(connected - 1, step - 1));
      connected = Math.max(connected, step);
      await eventually(
        () =>
          service.query<{ n: number }>("SELECT COUNT(*) AS n FROM accounts WHERE status = 'running'")[0]?.n === step,
        { what: `${step} running accounts`, timeoutMs: 600_000, intervalMs: 1000 },
      );
      console.log(
        `\n-- ${step} accounts on the gateway (added in ${((now() - t0) / 1000).toFixed(0)} s; load average ${load()}) --`,
      );
      await new Promise((r) => setTimeout(r, SETTLE_MS));

      await reportIdle(metricsPort, () => meter);
      const rows: Record<string, number[]> = {
        total: [],
        floor: [],
        gatewayHeard: [],
        over: [],
        ours: [],
        wake: [],
        fetch: [],
        toEvent: [],
        apply: [],
        applyLookup: [],
        applyR2: [],
        applyD1: [],
        delivery: [],
        answer: [],
      };
      const lags: number[][] = [];
      let earlyFloors = 0;
      for (let i = 0; i < COUNT; i++) {
        const subject = `latency ${step} ${i}`;
        const sentAt = now();
        const floorHeard = new Promise<number>((r) => (heard = () => r(now())));
        // Postfix's "250 queued" is the start; deliver() resolves right after it with wait: false.
        const accepted = await deliver(mail.info(), {
          from: 'bench@remote.test',
          to: alice.email,
          subject,
          text: 'x',
          wait: false,
        }).then(now);
        const idleAt = await floorHeard;
        const hook = await eventually(() => received.get(subject), {
          what: subject,
          timeoutMs: 30_000,
          intervalMs: 2,
        });
        const hookAt = hook.at;
        rows.total!.push(hookAt - accepted);
        rows.floor!.push(idleAt - accepted);
        if (idleAt - accepted < EARLY_FLOOR_MS) earlyFloors++;
        rows.over!.push(hookAt - idleAt);
        // This message's lines: logged after it was accepted, before the next one (the Worker's
        // answer may come after the subscriber got the webhook).
        await new Promise((r) => setTimeout(r, 200));
        const ours = (at: number) => at >= accepted && at < sentAt + GAP_MS;
        const pass = relayed.find((r) => ours(r.at));
        const relay = relays.find((r) => ours(r.at));
        const apply = applies.find((a) => ours(a.at));
        if (pass && relay) {
          const notified = pass.at - pass.sinceNotify;
          rows.wake!.push(notified - idleAt);
          rows.gatewayHeard!.push(notified - accepted);
          if (hookAt - idleAt > 500)
            console.log(
              `  ${subject}: ${ms(hookAt - idleAt)} ms over the floor; after Postfix accepted it the plain client was told at ${ms(idleAt - accepted)} ms, the gateway at ${ms(notified - accepted)} ms`,
            );
          rows.ours!.push(hookAt - notified);
          const sent = relay.at - relay.roundTrip;
          rows.fetch!.push(sent - notified);
          rows.toEvent!.push(hook.madeAt - sent);
          rows.answer!.push(relay.roundTrip);
        }
        rows.delivery!.push(hookAt - hook.madeAt);
        if (apply) {
          rows.apply!.push(apply.applyMs);
          rows.applyLookup!.push(apply.lookupMs);
          rows.applyR2!.push(apply.r2Ms);
          rows.applyD1!.push(apply.d1Ms);
        }
        const wait = GAP_MS + spread(i) - (now() - sentAt);
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        if (i % 10 === 9) {
          const m = await scrape(metricsPort);
          lags.push(['p50', 'p99', 'max'].map((q) => (m.get(`nodejs_eventloop_lag_${q}_seconds`) ?? 0) * 1000));
        }
      }
      console.log(`${COUNT} isolated messages, one every ${GAP_MS / 1000}–${GAP_MS / 1000 + 1} s (ms)`);
      console.log(summary('Postfix accepted -> subscriber (end to end)', rows.total!));
      console.log(summary('Postfix accepted -> plain IDLE client (floor)', rows.floor!));
      console.log(summary("Postfix accepted -> gateway's IDLE notified", rows.gatewayHeard!));
      console.log(
        `  plain client told within ${EARLY_FLOOR_MS} ms (its once-a-second check, not the push): ${earlyFloors}`,
      );
      console.log(summary('OVER THE FLOOR (floor heard -> subscriber)', rows.over!));
      console.log(summary("over the gateway's own notification", rows.ours!));
      const median = percentile(
        [...rows.over!].sort((a, b) => a - b),
        50,
      );
      if (alone === null) alone = median;
      else
        console.log(`  the full gateway adds (median over the floor minus the first step's): ${ms(median - alone)} ms`);
      console.log(summary('  wake: plain client notified -> gateway', rows.wake!));
      console.log(summary('  fetch: notified -> change sent', rows.fetch!));
      console.log(summary('  Worker: change sent -> event made (object)', rows.toEvent!));
      console.log(summary('  delivery: event made -> subscriber', rows.delivery!));
      console.log(summary("  (the object's whole apply)", rows.apply!));
      console.log(summary('    of which D1 reads before deciding', rows.applyLookup!));
      console.log(summary('    of which R2 writes', rows.applyR2!));
      console.log(summary('    of which D1 batches (the commit)', rows.applyD1!));
      console.log(summary("  (the Worker's answer to the change)", rows.answer!));
      console.log(
        `gateway event-loop delay meanwhile (per 10 messages) p50/p99/max ms: ${lags.map((l) => l.map((v) => v.toFixed(0)).join('/')).join(', ')}`,
      );
    }
    await idler.logout();
    // A CPU profile is written when the process exits of its own accord (the service's stop kills it).
    if (PROFILE_DIR) await gateway.kill('SIGTERM');
  } finally {
    subscriber.close();
    await service.stop();
    await mail.stop();
  }
}

/** CPU seconds used so far by each kind of process on the machine (its command name: node, workerd, imap, …). */
function cpuByCommand(): Map<string, number> {
  const ticks = 100; // USER_HZ on Linux
  const used = new Map<string, number>();
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    const command = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime: fields 14 and 15 of the stat line (11 and 12 after the command).
    const seconds = (Number(fields[11]) + Number(fields[12])) / ticks;
    used.set(command, (used.get(command) ?? 0) + seconds);
  }
  return used;
}

/** The processes that used the most CPU between two `cpuByCommand` readings, in % of one core. */
function topCpu(before: Map<string, number>, after: Map<string, number>, ms: number): string {
  return [...after.entries()]
    .map(([command, seconds]) => [command, ((seconds - (before.get(command) ?? 0)) * 100_000) / ms] as const)
    .filter(([, percent]) => percent >= 1)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 6)
    .map(([command, percent]) => `${command} ${percent.toFixed(0)} %`)
    .join(', ');
}

/** What the accounts cost while no mail arrives: IDLE_MS measured, printed per minute. */
async function reportIdle(metricsPort: number, meter: () => MeterTotals): Promise<void> {
  const before = {
    metrics: await scrape(metricsPort),
    meter: structuredClone(meter()),
    at: now(),
    cpu: cpuByCommand(),
  };
  await new Promise((r) => setTimeout(r, IDLE_MS));
  const after = { metrics: await scrape(metricsPort), meter: structuredClone(meter()), at: now(), cpu: cpuByCommand() };
  const minutes = (after.at - before.at) / 60_000;
  const per = (v: number) => (v / minutes).toFixed(0);
  const delta = (name: string) => (after.metrics.get(name) ?? 0) - (before.metrics.get(name) ?? 0);
  const calls = [...after.metrics.keys()]
    .filter((k) => k.startsWith('mailbox_gateway_worker_calls_total{'))
    .map((k) => `${/call="([^"]+)"/.exec(k)?.[1]} ${per(delta(k))}`)
    .join(', ');
  const relayed = [...after.metrics.keys()]
    .filter((k) => k.startsWith('mailbox_gateway_changes_relayed_total{') && delta(k) > 0)
    .map((k) => `${/kind="([^"]+)"/.exec(k)?.[1]} ${per(delta(k))}`)
    .join(', ');
  const lag = ['p50', 'p99', 'max'].map((q) =>
    ((after.metrics.get(`nodejs_eventloop_lag_${q}_seconds`) ?? 0) * 1000).toFixed(0),
  );
  console.log(`without mail, per minute (${minutes.toFixed(1)} min measured; load average ${load()}):`);
  console.log(
    `  gateway: polls ${per(delta('mailbox_gateway_polls_total'))}; calls to the Worker: ${calls} (changes in them: ${relayed || 'none'}); event-loop delay p50/p99/max ${lag.join('/')} ms`,
  );
  const invocations = Object.entries(after.meter.invocations)
    .map(([kind, n]) => [kind, n - (before.meter.invocations[kind] ?? 0)] as const)
    .filter(([, n]) => n > 0)
    .sort((a, b) => b[1] - a[1]);
  const requests = invocations.reduce((sum, [, n]) => sum + n, 0);
  console.log(`  Worker: ${per(requests)} requests (${invocations.map(([k, n]) => `${k} ${per(n)}`).join(', ')})`);
  console.log(
    `  D1: ${per(after.meter.statements - before.meter.statements)} statements, ${per(after.meter.writes - before.meter.writes)} writing, ${per(after.meter.rows_written - before.meter.rows_written)} rows written`,
  );
  console.log(`  CPU by process (% of one core): ${topCpu(before.cpu, after.cpu, after.at - before.at)}`);
}
