/**
 * Delivery latency: from Postfix accepting a message for alice to the subscriber receiving the
 * signed `email.new`, p50 and p99 over BENCH_LATENCY_COUNT messages (default 100). Beside it, the
 * floor measured in the same run: when a plain imapflow client idling on the same INBOX hears of
 * the message (Dovecot 2.3 waits a fixed ~500 ms before it notifies an idling client). What we own
 * is the difference.
 */
import { createServer } from 'node:http';
import { deliver, openImap } from '../mailserver/client.ts';
import { startMailServer } from '../mailserver/mailserver.ts';
import { connectMailbox } from '../node/connect.ts';
import { eventually, startService } from '../node/service.ts';

const COUNT = Number(process.env.BENCH_LATENCY_COUNT ?? 100);

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
const summary = (label: string, values: number[]) => {
  const s = [...values].sort((a, b) => a - b);
  return `${label}: p50 ${percentile(s, 50).toFixed(0)} ms, p99 ${percentile(s, 99).toFixed(0)} ms, min ${s[0]!.toFixed(0)} ms, max ${s[s.length - 1]!.toFixed(0)} ms`;
};

export async function run(): Promise<void> {
  const mail = await startMailServer();
  const service = await startService();
  const received = new Map<string, number>();
  const subscriber = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const at = performance.now();
      const event = JSON.parse(body) as { type: string; data: { subject?: string } };
      if (event.type === 'email.new' && event.data.subject) received.set(event.data.subject, at);
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => subscriber.listen(0, '127.0.0.1', () => r()));
  const port = (subscriber.address() as { port: number }).port;
  try {
    const alice = mail.users.find((u) => u.user === 'alice')!;
    // Debug logging: the gateway logs, per relayed pass, the time from IDLE notification to the Worker's acknowledgement.
    const gateway = service.startGateway('bench-latency', {
      NODE_EXTRA_CA_CERTS: mail.caFile,
      GATEWAY_LOG_LEVEL: 'debug',
    });
    const account = await connectMailbox(service, mail.info(), 'alice');
    await service.api('POST', '/webhooks/endpoints', {
      url: `http://127.0.0.1:${port}/`,
      trigger_events: ['email.new'],
      account_ids: [account.id],
    });

    // The floor: a plain client idling on the same INBOX.
    const idler = await openImap(mail.info(), 'alice');
    await idler.mailboxOpen('INBOX');
    let heard: (() => void) | null = null;
    idler.on('exists', () => heard?.());
    void idler.idle();

    const endToEnd: number[] = [];
    const floor: number[] = [];
    for (let i = 0; i < COUNT; i++) {
      const subject = `latency ${i}`;
      const floorHeard = new Promise<number>((r) => (heard = () => r(performance.now())));
      // Postfix's "250 queued" is the start; deliver() resolves right after it with wait: false.
      const accepted = await deliver(mail.info(), {
        from: 'bench@remote.test',
        to: alice.email,
        subject,
        text: 'x',
        wait: false,
      }).then(() => performance.now());
      const idleAt = await floorHeard;
      const hookAt = await eventually(() => received.get(subject), { what: subject, timeoutMs: 30_000, intervalMs: 2 });
      endToEnd.push(hookAt - accepted);
      floor.push(idleAt - accepted);
    }
    await idler.logout();
    const ours = endToEnd.map((v, i) => v - floor[i]!);
    console.log(`${COUNT} messages, one at a time`);
    console.log(summary('Postfix accepted -> subscriber got signed email.new', endToEnd));
    console.log(summary('Postfix accepted -> plain IDLE client notified (floor)', floor));
    console.log(summary('our share (difference)                              ', ours));
    const relayed = gateway.log.flatMap((line) => {
      try {
        const entry = JSON.parse(line) as { msg?: string; path?: string; since_notify_ms?: number };
        return entry.msg === 'relayed new mail' && entry.path === 'INBOX' && typeof entry.since_notify_ms === 'number'
          ? [entry.since_notify_ms]
          : [];
      } catch {
        return [];
      }
    });
    if (relayed.length) console.log(summary("gateway's IDLE notification -> change in the outbox", relayed));
  } finally {
    subscriber.close();
    await service.stop();
    await mail.stop();
  }
}
