/**
 * Webhook delivery throughput through the real parts (`npm start`: workerd, local D1 and Queue, the
 * consumer) to a real HTTP subscriber on loopback. The events are written straight into the outbox
 * (the local D1 file) as if their changes had committed and their queue send had been lost, then
 * the sweep (GET /__scheduled) puts them on the queue: from there on it is the production path.
 * Prints deliveries per second to one endpoint (BENCH_WEBHOOK_EVENTS, default 1000) and for a
 * fan-out of BENCH_WEBHOOK_FANOUT_EVENTS (default 200) events to 10 endpoints.
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { d1FileName, d1Folder, DIRECTORY } from '../node/d1-files.ts';
import { eventually, type Service, startService } from '../node/service.ts';

const ONE_ENDPOINT_EVENTS = Number(process.env.BENCH_WEBHOOK_EVENTS ?? 1000);
const FANOUT_EVENTS = Number(process.env.BENCH_WEBHOOK_FANOUT_EVENTS ?? 200);
const FANOUT_ENDPOINTS = 10;
/** The sweep dispatches at most this many outbox events per run (worker/webhooks/sweep.ts). */
const SWEEP_LIMIT = 500;

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const eventId = () => `evt_${Array.from(randomBytes(26), (b) => CROCKFORD[b % 32]).join('')}`;

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;

/** Arrivals per `endpoint tag|event id`, first one kept; `calls` counts duplicates too. */
function startSubscriber() {
  const arrivals = new Map<string, number>();
  let calls = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      calls++;
      const event = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: string };
      const key = `${req.url}|${event.id}`;
      if (!arrivals.has(key)) arrivals.set(key, performance.now());
      res.writeHead(200).end();
    });
  });
  return {
    arrivals,
    calls: () => calls,
    server,
    listen: () =>
      new Promise<number>((r) => server.listen(0, '127.0.0.1', () => r((server.address() as { port: number }).port))),
  };
}

function writeOutbox(service: Service, count: number): void {
  // The directory's database (DB): the bench's events are of no account.
  const db = new DatabaseSync(join(d1Folder(service.stateDir), d1FileName(DIRECTORY)));
  try {
    // Older than the sweep's grace period, never enqueued: the sweep sends them at once.
    const createdAt = new Date(Date.now() - 120_000).toISOString();
    const insert = db.prepare(
      "INSERT INTO events (id, type, account_id, data_json, created_at) VALUES (?, 'email.new', NULL, ?, ?)",
    );
    db.exec('BEGIN');
    for (let i = 0; i < count; i++) {
      insert.run(eventId(), JSON.stringify({ object: 'Email', id: `bench-${i}`, subject: `bench ${i}` }), createdAt);
    }
    db.exec('COMMIT');
  } finally {
    db.close();
  }
}

async function scenario(
  service: Service,
  sub: ReturnType<typeof startSubscriber>,
  port: number,
  label: string,
  events: number,
  endpoints: number,
): Promise<void> {
  const tag = randomBytes(4).toString('hex');
  const ids: string[] = [];
  for (let i = 0; i < endpoints; i++) {
    const res = await service.api('POST', '/webhooks/endpoints', {
      url: `http://127.0.0.1:${port}/${tag}/${i}`,
      trigger_events: ['email.new'],
    });
    if (res.status !== 200) throw new Error(`creating an endpoint: ${res.status} ${JSON.stringify(res.body)}`);
    ids.push(res.body.id);
  }
  writeOutbox(service, events);
  const expected = events * endpoints;
  const ours = () => [...sub.arrivals.entries()].filter(([key]) => key.startsWith(`/${tag}/`));
  const callsBefore = sub.calls();
  const start = performance.now();
  for (let sent = 0; sent < events; sent += SWEEP_LIMIT) {
    const res = await fetch(`${service.base}/__scheduled`);
    if (!res.ok) throw new Error(`/__scheduled answered ${res.status}`);
  }
  await eventually(() => ours().length >= expected, {
    what: `${expected} deliveries`,
    timeoutMs: 10 * 60_000,
    intervalMs: 5,
  });
  const times = ours()
    .map(([, at]) => at - start)
    .sort((a, b) => a - b);
  const seconds = times[times.length - 1]! / 1000;
  console.log(
    `${label}: ${expected} deliveries (${events} events × ${endpoints}) in ${seconds.toFixed(2)} s = ` +
      `${(expected / seconds).toFixed(0)} deliveries/s; from the sweep: p50 ${percentile(times, 50).toFixed(0)} ms, ` +
      `p99 ${percentile(times, 99).toFixed(0)} ms; calls made ${sub.calls() - callsBefore} (duplicates included)`,
  );
  for (const id of ids) await service.api('DELETE', `/webhooks/endpoints/${id}`);
}

export async function run(): Promise<void> {
  const service = await startService();
  const sub = startSubscriber();
  const port = await sub.listen();
  try {
    await scenario(service, sub, port, 'one endpoint', ONE_ENDPOINT_EVENTS, 1);
    await scenario(service, sub, port, `fan-out to ${FANOUT_ENDPOINTS} endpoints`, FANOUT_EVENTS, FANOUT_ENDPOINTS);
  } finally {
    sub.server.close();
    await service.stop();
  }
}
