/**
 * Memory and connections of idle accounts: one gateway with its default settings holds N idle
 * accounts (BENCH_MEMORY_ACCOUNTS, default 1,000) on the test Dovecot. Prints the gateway's RSS with
 * no account (base), the RSS each idle account adds, and the IMAP connections per account as
 * Dovecot counts them (`doveadm who`). Nothing asserted: the goal is <= 150 KB per account,
 * base <= 80 MB, <= 2 IMAP connections per account. BENCH_MEMORY_GATEWAY_ENV (JSON) adds environment
 * to the gateway's, e.g. '{"NODE_OPTIONS":"--max-semi-space-size=16"}' for a larger young generation.
 * The gateway runs the way operators run it (`npm run gateway`: scripts/gateway.mjs, the bundle);
 * BENCH_MEMORY_ENTRY=gateway/main.ts measures the .ts sources instead (what the tests run).
 * BENCH_MEMORY_NODE_FLAGS adds node flags; with --trace-gc the garbage collector's pauses while the
 * idle accounts are measured are printed too (what the V8 flags cost in pauses).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { gatewayCommand } from '../../scripts/gateway-command.mjs';
import { DEFAULT_USERS, startMailServer, type MailServer } from '../mailserver/mailserver.ts';
import { connectMailbox } from '../node/connect.ts';
import { eventually, startService, type Service } from '../node/service.ts';

const ACCOUNTS = Number(process.env.BENCH_MEMORY_ACCOUNTS ?? 1_000);
/** Accounts connected at once (each connect verifies the mailbox over IMAP and SMTP first). */
const CONNECT_CONCURRENCY = 8;
/**
 * After the connects, the gateway closes each account's command connection once it has been unused
 * for GATEWAY_COMMAND_IDLE_MS (30 s by default): the measurement starts after that.
 */
const COMMAND_IDLE_MS = Number(process.env.GATEWAY_COMMAND_IDLE_MS ?? 30_000);
/** Idle time the measurement spans: a few poll intervals (15 s by default). */
const SETTLE_MS = Number(process.env.BENCH_MEMORY_SETTLE_MS ?? 45_000);

const MiB = 1024 * 1024;

/** One `--trace-gc` line: the collection's kind and its pause on the main thread (ms). */
const GC_LINE = /ms: (.+?) [\d.]+ \([\d.]+\) -> .*? MB, (?:pooled: [\d.]+ MB, )?([\d.]+) \/ [\d.]+ ms/;

/** The pauses of the collections logged from now on, until the returned function summarises them. */
function watchGc(gateway: ChildProcess): () => string {
  const pauses = new Map<string, number[]>();
  let rest = '';
  const onData = (chunk: Buffer) => {
    const lines = (rest + chunk.toString('utf8')).split('\n');
    rest = lines.pop() ?? '';
    for (const line of lines) {
      const m = GC_LINE.exec(line);
      if (m) pauses.set(m[1]!, [...(pauses.get(m[1]!) ?? []), Number(m[2])]);
    }
  };
  gateway.stdout?.on('data', onData);
  const since = performance.now();
  return () => {
    gateway.stdout?.off('data', onData);
    const seconds = (performance.now() - since) / 1000;
    const kinds = [...pauses].map(([kind, ms]) => {
      const sorted = ms.sort((a, b) => a - b);
      const total = sorted.reduce((a, b) => a + b, 0);
      return `${kind} ${sorted.length} (total ${total.toFixed(0)} ms, median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(1)}, max ${sorted.at(-1)!.toFixed(0)} ms)`;
    });
    return `GC pauses over ${seconds.toFixed(0)} s with the idle accounts: ${kinds.join('; ') || 'none logged'}`;
  };
}

function rssOf(gateway: ChildProcess): number {
  const status = readFileSync(`/proc/${gateway.pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+)\s+kB/.exec(status)?.[1] ?? Number.NaN);
  return kb * 1024;
}

/** RSS samples over `ms`: the median (a GC may run in between). */
async function steadyRss(gateway: ChildProcess, ms: number): Promise<number> {
  const samples: number[] = [];
  for (const end = Date.now() + ms; Date.now() < end; ) {
    samples.push(rssOf(gateway));
    await new Promise((r) => setTimeout(r, 1000));
  }
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)]!;
}

async function connectionsPerUser(mail: MailServer, users: Set<string>): Promise<number[]> {
  const out = await mail.doveadm(['who', '-1']);
  const counts = new Map<string, number>();
  for (const line of out.split('\n').slice(1)) {
    const [user, proto] = line.trim().split(/\s+/);
    if (user && proto === 'imap' && users.has(user)) counts.set(user, (counts.get(user) ?? 0) + 1);
  }
  return [...users].map((u) => counts.get(u) ?? 0);
}

export async function run(): Promise<void> {
  const users = Array.from({ length: ACCOUNTS }, (_, i) => `idle${String(i).padStart(4, '0')}`);
  const mail = await startMailServer({
    users: [...DEFAULT_USERS, ...users],
    maxImapConnections: ACCOUNTS * 3 + 200,
  });
  let service: Service | undefined;
  let stopGateway: (() => Promise<unknown>) | undefined;
  try {
    service = await startService();
    // `npm run gateway`'s command line (package.json: malloc settings, V8 flags; README "Configuration").
    const command = gatewayCommand(process.cwd());
    const entry = process.env.BENCH_MEMORY_ENTRY ?? command.args.at(-1)!;
    const flags = [
      ...command.args.slice(0, -1),
      // More V8/Node flags to compare (some are refused in NODE_OPTIONS).
      ...(process.env.BENCH_MEMORY_NODE_FLAGS?.split(' ').filter(Boolean) ?? []),
    ];
    if (process.env.BENCH_MEMORY_SNAPSHOT === '1') flags.push('--heapsnapshot-signal=SIGUSR2');
    // The script's own assignments (glibc's malloc thresholds), as `npm run gateway` sets them, and
    // those to compare (e.g. V8's --max-semi-space-size, other GLIBC_TUNABLES).
    const launchEnv: Record<string, string> = {
      ...command.env,
      ...(process.env.BENCH_MEMORY_GATEWAY_ENV && JSON.parse(process.env.BENCH_MEMORY_GATEWAY_ENV)),
    };
    const gateway = spawn(process.execPath, [...flags, entry], {
      env: {
        ...process.env,
        WORKER_URL: service.base,
        GATEWAY_SECRET: service.gatewaySecret,
        GATEWAY_ID: 'bench-memory',
        GATEWAY_LOG_LEVEL: 'warn',
        ALLOW_PRIVATE_MAIL_HOSTS: 'true',
        NODE_EXTRA_CA_CERTS: mail.caFile,
        ...launchEnv,
      },
      // stdout: the collector's trace when asked for (--trace-gc), the warn-level log otherwise.
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    // Read at once (a full pipe would block the gateway's writes); only watchGc looks at it.
    gateway.stdout?.resume();
    stopGateway = () => {
      gateway.kill('SIGTERM');
      return new Promise((r) => (gateway.exitCode !== null ? r(undefined) : gateway.once('exit', () => r(undefined))));
    };
    // Before any verify (the first one takes OpenSSL and the IMAP code paths into use; nodemailer waits for a send).
    await new Promise((r) => setTimeout(r, 5_000));
    const start = await steadyRss(gateway, 5_000);
    console.log(
      `gateway ${Object.entries(launchEnv)
        .map(([k, v]) => `${k}=${v} `)
        .join('')}node ${[...flags, entry].join(' ')}: RSS at start ${(start / MiB).toFixed(1)} MiB`,
    );
    // The gateway is up once it takes an account: connect one user that is not measured, then drop it.
    const probe = await connectMailbox(service, mail.info(), 'alice');
    await service.api('DELETE', `/accounts/${probe.id}`);
    await eventually(async () => (await connectionsPerUser(mail, new Set(['alice'])))[0] === 0, {
      what: 'the probe account closed',
      timeoutMs: 60_000,
      intervalMs: 500,
    });
    const base = await steadyRss(gateway, 10_000);
    console.log(`base RSS (no account, after one verify): ${(base / MiB).toFixed(1)} MiB`);

    const t0 = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: CONNECT_CONCURRENCY }, async () => {
        while (next < users.length) {
          const user = users[next++]!;
          await connectMailbox(service!, mail.info(), user);
        }
      }),
    );
    await eventually(
      () =>
        service!.query<{ n: number }>("SELECT COUNT(*) AS n FROM accounts WHERE status = 'running'")[0]?.n === ACCOUNTS,
      { what: `${ACCOUNTS} running accounts`, timeoutMs: 600_000, intervalMs: 1000 },
    );
    console.log(`connected ${ACCOUNTS} accounts in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
    await new Promise((r) => setTimeout(r, COMMAND_IDLE_MS + 5_000));

    const gc = watchGc(gateway);
    const rss = await steadyRss(gateway, SETTLE_MS);
    const gcSummary = gc();
    const perAccount = (rss - base) / ACCOUNTS;
    const counts = await connectionsPerUser(mail, new Set(users));
    const total = counts.reduce((a, b) => a + b, 0);
    console.log(`RSS with ${ACCOUNTS} idle accounts: ${(rss / MiB).toFixed(1)} MiB`);
    console.log(`RSS per idle account: ${(perAccount / 1024).toFixed(1)} KiB`);
    if (flags.includes('--trace-gc')) console.log(gcSummary);
    if (process.env.BENCH_MEMORY_SNAPSHOT === '1') {
      // The gateway was started with --heapsnapshot-signal: its heap goes to a file in its working directory.
      gateway.kill('SIGUSR2');
      await new Promise((r) => setTimeout(r, 20_000));
    }
    console.log(
      `IMAP connections per account (doveadm who): mean ${(total / ACCOUNTS).toFixed(2)}, max ${Math.max(...counts)}, min ${Math.min(...counts)}`,
    );
  } finally {
    await stopGateway?.();
    await service?.stop();
    await mail.stop();
  }
}
