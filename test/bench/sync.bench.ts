/**
 * Sync throughput: 10,000 messages arrive in a connected mailbox while its gateway is stopped;
 * a gateway is started and we time until the API lists them all. Beside it, the raw rate at which
 * a plain imapflow client fetches the same messages (source, flags, date, size) from the same
 * Dovecot: the floor no sync can beat.
 */
import { startMailServer } from '../mailserver/mailserver.ts';
import { openImap } from '../mailserver/client.ts';
import { connectMailbox } from '../node/connect.ts';
import { eventually, startService } from '../node/service.ts';

const COUNT = Number(process.env.BENCH_SYNC_COUNT ?? 10_000);

function message(i: number): string {
  return [
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
  ].join('\r\n');
}

export async function run(): Promise<void> {
  const mail = await startMailServer();
  const service = await startService();
  try {
    let gateway = service.startGateway('bench-gw', { NODE_EXTRA_CA_CERTS: mail.caFile });
    const account = await connectMailbox(service, mail.info(), 'alice');
    await gateway.kill('SIGTERM');

    // Fill the mailbox through IMAP APPEND (pipelined): it is the new mail the sync must catch up on.
    const imap = await openImap(mail.info(), 'alice');
    const t0 = performance.now();
    for (let i = 0; i < COUNT; i += 200) {
      await Promise.all(
        Array.from({ length: Math.min(200, COUNT - i) }, (_, k) => imap.append('INBOX', message(i + k), [])),
      );
    }
    console.log(`filled INBOX with ${COUNT} messages in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

    // The floor: a plain client fetching the same messages.
    await imap.mailboxOpen('INBOX');
    const f0 = performance.now();
    let fetched = 0;
    for await (const msg of imap.fetch('1:*', {
      uid: true,
      flags: true,
      internalDate: true,
      size: true,
      source: true,
    })) {
      if (msg.source) fetched++;
    }
    const fetchSeconds = (performance.now() - f0) / 1000;
    await imap.logout();

    // The sync: a gateway starts and catches up; done when the API lists every message.
    const s0 = performance.now();
    gateway = service.startGateway('bench-gw', { NODE_EXTRA_CA_CERTS: mail.caFile });
    await eventually(
      async () => {
        const row = service.query<{ n: number }>(
          'SELECT COUNT(*) AS n FROM emails WHERE account_id = ?',
          account.id,
        )[0];
        return (row?.n ?? 0) >= COUNT;
      },
      { what: `${COUNT} emails in D1`, timeoutMs: 1_800_000, intervalMs: 200 },
    );
    const syncSeconds = (performance.now() - s0) / 1000;
    const listed = (await service.api('GET', `/emails?account_id=${account.id}&limit=1`)).body.data.length;

    const syncRate = COUNT / syncSeconds;
    const fetchRate = fetched / fetchSeconds;
    console.log(
      `raw imapflow fetch: ${fetched} messages in ${fetchSeconds.toFixed(2)} s = ${fetchRate.toFixed(0)} msg/s`,
    );
    console.log(
      `sync into the API:  ${COUNT} messages in ${syncSeconds.toFixed(2)} s = ${syncRate.toFixed(0)} msg/s (API answers: ${listed === 1 ? 'yes' : 'no'})`,
    );
    console.log(`ratio sync/raw: ${(syncRate / fetchRate).toFixed(3)}`);
  } finally {
    await service.stop();
    await mail.stop();
  }
}
