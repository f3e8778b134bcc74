/**
 * A folder of 100,000 messages (BENCH_BIG_FOLDER_COUNT) on a Dovecot without CONDSTORE and QRESYNC,
 * the hardest case for a large folder: every session's first pass re-reads the flags of every message
 * and takes a snapshot of every UID. Prints:
 *  1. how long the folder takes to sync (all of it arrives while the gateway is stopped), and the
 *     largest applied batch's D1 statements (`sync stats`);
 *  2. after another client marks 1 message in 100 \Seen and the gateway is killed and started again:
 *     how long until the API shows those flags, how many change calls that took and the slowest one
 *     (each flags or snapshot piece is a call of its own, common/relay-pieces.ts; the Worker's side
 *     of a piece is metered against Cloudflare's limits in test/worker/sync-big-folder.test.ts).
 * For both, per kind of call to the Worker (the Worker runs with D1_METER=true): the calls made, and
 * per call the D1 queries, statements and subrequests (max and mean) against Cloudflare's
 * 1,000-queries and 50-subrequests limits per invocation (call-meter.ts).
 */
import { openImap } from '../mailserver/client.ts';
import { fillMaildir } from '../mailserver/maildir.ts';
import { startMailServer } from '../mailserver/mailserver.ts';
import { connectMailbox } from '../node/connect.ts';
import { eventually, startService, type Service } from '../node/service.ts';
import { describeCalls, meterCalls } from './call-meter.ts';

const COUNT = Number(process.env.BENCH_BIG_FOLDER_COUNT ?? 100_000);
const GATEWAY_ID = 'bench-big-folder';

const message = (i: number) =>
  Buffer.from(
    `From: sender${i % 50}@remote.test\r\nTo: alice@example.test\r\nSubject: big folder ${i}\r\n` +
      `Message-ID: <big-${i}@remote.test>\r\nDate: ${new Date().toUTCString()}\r\n\r\nMessage ${i}.\r\n`,
  );

const emails = (service: Service, accountId: string, where = '') =>
  service.mailQuery<{ n: number }>(
    accountId,
    `SELECT COUNT(*) AS n FROM emails WHERE account_id = ? ${where}`,
    accountId,
  )[0]?.n ?? 0;

/** The changes calls the Worker answered since `from` (its log), with their durations. */
function changeCalls(service: Service, from: number): number[] {
  return service.workerLog
    .slice(from)
    .flatMap((l) => /POST \/internal\/gateway\/accounts\/\S+\/changes 200 OK \((\d+)ms\)/.exec(l)?.[1] ?? [])
    .map(Number);
}

export async function run(): Promise<void> {
  const mail = await startMailServer({ withoutCapabilities: ['CONDSTORE', 'QRESYNC'] });
  const service = await startService({ workerEnv: { D1_METER: 'true' } });
  const calls = meterCalls(service);
  const env = { NODE_EXTRA_CA_CERTS: mail.caFile };
  try {
    let gateway = service.startGateway(GATEWAY_ID, env);
    const alice = await connectMailbox(service, mail.info(), 'alice');
    const creator = await openImap(mail.info(), 'alice');
    await creator.mailboxCreate('Big');
    await creator.logout();
    await gateway.kill('SIGTERM');

    const t0 = performance.now();
    fillMaildir(mail, 'alice', 'Big', COUNT, message);
    console.log(`filled Big with ${COUNT} messages in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

    service.workerLog.length = 0;
    calls.take();
    const t1 = performance.now();
    gateway = service.startGateway(GATEWAY_ID, env);
    await eventually(async () => emails(service, alice.id) >= COUNT, {
      what: `${COUNT} emails`,
      timeoutMs: 3_600_000,
      intervalMs: 1_000,
    });
    const syncSeconds = (performance.now() - t1) / 1000;
    const statements = service.workerLog.flatMap((l) => {
      const m = /sync stats (\{.*\})/.exec(l);
      return m ? [Number(JSON.parse(m[1]!).d1Statements ?? 0)] : [];
    });
    console.log(
      `synced ${COUNT} messages in ${syncSeconds.toFixed(1)} s (${(COUNT / syncSeconds).toFixed(0)} msg/s); ${statements.length} batches, at most ${Math.max(...statements)} D1 statements in one`,
    );
    console.log(describeCalls(calls.take()).join('\n'));

    // Another client marks one message in a hundred; the gateway dies and a new one starts.
    const imap = await openImap(mail.info(), 'alice');
    await imap.mailboxOpen('Big');
    const marked = Math.floor(COUNT / 100);
    for (let i = 1; i <= COUNT; i += 100 * 500) {
      const uids = Array.from({ length: 500 }, (_, k) => i + k * 100).filter((u) => u <= COUNT);
      await imap.messageFlagsAdd(uids.join(','), ['\\Seen'], { uid: true });
    }
    await imap.logout();
    await gateway.kill('SIGKILL');
    const from = service.workerLog.length;
    calls.take();
    const t2 = performance.now();
    gateway = service.startGateway(GATEWAY_ID, env);
    await eventually(async () => emails(service, alice.id, 'AND unread = 0') >= marked, {
      what: `${marked} emails read`,
      timeoutMs: 1_800_000,
      intervalMs: 500,
    });
    const changes = changeCalls(service, from);
    console.log(
      `after a restart the flags of all ${COUNT} messages were read again and ${marked} changes shown in ${((performance.now() - t2) / 1000).toFixed(1)} s: ${changes.length} change calls, the slowest ${Math.max(0, ...changes)} ms`,
    );
    console.log(describeCalls(calls.take()).join('\n'));
    await gateway.kill('SIGTERM');
  } finally {
    await service.stop();
    await mail.stop();
  }
}
