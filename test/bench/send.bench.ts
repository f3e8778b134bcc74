/**
 * Send throughput: messages sent through POST /emails (the gateway submits each to the test
 * Postfix and APPENDs the same bytes to alice's Sent folder), timed until every API call answered,
 * and until every Sent copy synced back as `email.new` with origin api.
 */
import { startMailServer } from '../mailserver/mailserver.ts';
import { connectMailbox } from '../node/connect.ts';
import { eventually, startService } from '../node/service.ts';

const COUNT = Number(process.env.BENCH_SEND_COUNT ?? 200);
const CONCURRENCY = Number(process.env.BENCH_SEND_CONCURRENCY ?? 8);

export async function run(): Promise<void> {
  const mail = await startMailServer();
  const service = await startService();
  try {
    service.startGateway('bench-gw', { NODE_EXTRA_CA_CERTS: mail.caFile });
    const account = await connectMailbox(service, mail.info(), 'alice');
    const bob = mail.users.find((u) => u.user === 'bob')!;
    const body = (i: number) => ({
      account_id: account.id,
      to: [{ identifier: bob.email }],
      subject: `bench send ${i}`,
      body: `<p>${'Benchmark body. '.repeat(60)}</p>`,
    });

    const t0 = performance.now();
    let next = 0;
    let failed = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < COUNT) {
          const res = await service.api('POST', '/emails', body(next++));
          if (res.status !== 200) failed++;
        }
      }),
    );
    const sendSeconds = (performance.now() - t0) / 1000;
    await eventually(
      () => {
        const row = service.mailQuery<{ n: number }>(
          account.id,
          "SELECT COUNT(*) AS n FROM emails WHERE account_id = ? AND origin = 'api'",
          account.id,
        )[0];
        return (row?.n ?? 0) >= COUNT - failed;
      },
      { what: 'the Sent copies', timeoutMs: 600_000, intervalMs: 200 },
    );
    const syncedSeconds = (performance.now() - t0) / 1000;

    console.log(
      `sent ${COUNT - failed} of ${COUNT} (concurrency ${CONCURRENCY}) in ${sendSeconds.toFixed(2)} s = ${((COUNT - failed) / sendSeconds).toFixed(1)} sends/s (SMTP + Sent copy)`,
    );
    console.log(`all Sent copies synced as origin api after ${syncedSeconds.toFixed(2)} s`);
  } finally {
    await service.stop();
    await mail.stop();
  }
}
