/**
 * Ingest into one database, and into several mail shards (docs/capacity.md): several accounts
 * receive new mail at once. BENCH_INGEST_SHARDS lists the shard counts to run (`1,3`): each run
 * starts the service with MAIL_SHARDS at that count, so connect spreads the accounts over them. BENCH_INGEST_ACCOUNTS
 * accounts (4) each get BENCH_INGEST_MESSAGES small messages (2,500) in INBOX while the gateway is
 * stopped; one gateway starts and we time until D1 holds them all. Prints messages per second for
 * all accounts together and, from the account objects' `sync stats` lines, the time D1 spent on
 * each message's writes: every account's writes go to the same database, which runs one write at a
 * time, so 1 s over that time is the most one database can take whatever runs the Worker.
 */
import type { ImapFlow } from 'imapflow';
import { cpus } from 'node:os';
import { openImap } from '../mailserver/client.ts';
import { startMailServer } from '../mailserver/mailserver.ts';
import { connectMailbox } from '../node/connect.ts';
import { eventually, type Service, startService } from '../node/service.ts';

const ACCOUNTS = Number(process.env.BENCH_INGEST_ACCOUNTS ?? 4);
const MESSAGES = Number(process.env.BENCH_INGEST_MESSAGES ?? 2_500);
const USERS = ['alice', 'bob', 'carol', 'dave', 'erin'];
const GATEWAY_ID = 'bench-ingest-gw';
const SHARD_COUNTS = (process.env.BENCH_INGEST_SHARDS ?? '1,3').split(',').map(Number);

function message(user: string, i: number): Buffer {
  return Buffer.from(
    [
      `From: Sender ${i % 40} <sender${i % 40}@remote.test>`,
      `To: ${user}@example.test`,
      `Subject: ingest ${user} ${i}`,
      `Date: ${new Date(Date.UTC(2026, 0, 1) + i * 1000).toUTCString()}`,
      `Message-ID: <ingest-${user}-${i}@remote.test>`,
      'MIME-Version: 1.0',
      'Content-Type: text/plain; charset=utf-8',
      '',
      `Message ${i} for ${user}. `.repeat(30),
      '',
    ].join('\r\n'),
  );
}

async function fill(imap: ImapFlow, messages: Buffer[]): Promise<void> {
  for (let i = 0; i < messages.length; i += 200)
    await Promise.all(messages.slice(i, i + 200).map((m) => imap.append('INBOX', m, [])));
}

/** Emails in every database, from GET /databases. */
async function emailsHeld(service: Service): Promise<number[]> {
  const { data } = await service.client.GET('/api/v1/databases');
  return data!.data.map((d) => d.emails);
}

export async function run(): Promise<void> {
  if (ACCOUNTS > USERS.length) throw new Error(`at most ${USERS.length} accounts (the test mail server's users)`);
  console.log(`${new Date().toISOString()}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}`);
  for (const shards of SHARD_COUNTS) await runWith(shards);
}

async function runWith(shards: number): Promise<void> {
  const mail = await startMailServer();
  const service = await startService({ workerEnv: { MAIL_SHARDS: String(shards) } });
  try {
    const users = USERS.slice(0, ACCOUNTS);
    const gateway = service.startGateway(GATEWAY_ID, { NODE_EXTRA_CA_CERTS: mail.caFile });
    const accounts = [];
    for (const user of users) accounts.push(await connectMailbox(service, mail.info(), user));
    await gateway.kill('SIGTERM');
    await Promise.all(
      users.map(async (user) => {
        const imap = await openImap(mail.info(), user);
        await fill(
          imap,
          Array.from({ length: MESSAGES }, (_, i) => message(user, i)),
        );
        await imap.logout();
      }),
    );

    service.workerLog.length = 0;
    const total = ACCOUNTS * MESSAGES;
    const start = performance.now();
    const running = service.startGateway(GATEWAY_ID, { NODE_EXTRA_CA_CERTS: mail.caFile });
    await eventually(async () => (await emailsHeld(service)).reduce((a, b) => a + b, 0) >= total, {
      what: `${total} emails in D1`,
      timeoutMs: 1_800_000,
      intervalMs: 500,
    });
    const seconds = (performance.now() - start) / 1000;
    await running.kill('SIGTERM');
    const spread = await emailsHeld(service);

    let d1Ms = 0;
    let created = 0;
    for (const line of service.workerLog) {
      const match = /sync stats (\{.*\})/.exec(line);
      if (!match) continue;
      const stats = JSON.parse(match[1]!) as { d1Ms?: number; created?: number };
      d1Ms += stats.d1Ms ?? 0;
      created += stats.created ?? 0;
    }
    const perMessage = d1Ms / Math.max(1, created);
    console.log(
      `\n-- ${ACCOUNTS} accounts × ${MESSAGES} messages into ${shards === 1 ? 'one database' : `${shards} shards`} (emails per database: ${spread.join(', ')}) --`,
    );
    console.log(
      `all accounts together: ${total} messages in ${seconds.toFixed(1)} s = ${(total / seconds).toFixed(0)} msg/s (${(total / seconds / ACCOUNTS).toFixed(0)} per account); gateway start included`,
    );
    console.log(
      `D1 time per new message: ${(perMessage * 1000).toFixed(0)} µs (its batches' wall time, summed over ${created} messages): one database takes at most about ${(1000 / perMessage).toFixed(0)} msg/s, ${shards} about ${((shards * 1000) / perMessage).toFixed(0)} msg/s`,
    );
  } finally {
    await service.stop();
    await mail.stop();
  }
}
