/**
 * `npm run soak [steps] [seed]`: the model-based integrity run (run.ts), long. Starts its own Dovecot,
 * Postfix, `npm start` and gateway; prints its figures and every problem found; exits 1 on a problem,
 * 2 when the run's own looks at the Worker, D1 or the server kept failing (no finding about the product).
 * SOAK_WITHOUT=CONDSTORE,QRESYNC runs it against a Dovecot that does not offer those extensions;
 * SOAK_DEFAULTS=1 runs the gateway at the shipped settings (15 s poll) instead of a 1 s poll;
 * SOAK_MINUTES=n stops after n minutes (with a last check) if the steps are not done by then;
 * SOAK_BIG_FOLDER=n puts n messages in Archive before the account is connected, so the run's
 * operations (moves, flags, expunges, UIDVALIDITY resets, kills mid-re-read) meet a folder that big.
 */
import { openImap } from '../../mailserver/client.ts';
import { fillMaildir } from '../../mailserver/maildir.ts';
import { connectMailbox } from '../connect.ts';
import { eventually, startEndToEnd, stopEndToEnd } from '../service.ts';
import { messageOf } from './operations.ts';
import { runModel } from './run.ts';

const steps = Number(process.argv[2] ?? 5000);
const seed = Number(process.argv[3] ?? Date.now() % 1_000_000);
const defaults = process.env.SOAK_DEFAULTS === '1';
const minutes = Number(process.env.SOAK_MINUTES ?? 0);
const env: Record<string, string> = defaults ? {} : { GATEWAY_POLL_INTERVAL_MS: '1000' };
const without = (process.env.SOAK_WITHOUT ?? '').split(',').filter(Boolean);
const bigFolder = Number(process.env.SOAK_BIG_FOLDER ?? 0);
/** A folder that big takes minutes to read again after a UIDVALIDITY reset at the shipped poll. */
const quiescenceMs = bigFolder ? 900_000 : undefined;
const { mail, service, gateway } = await startEndToEnd('gw-soak', env, { withoutCapabilities: without });
if (without.length) console.log(`soak: Dovecot without ${without.join(', ')}`);
if (defaults) console.log('soak: the gateway at its shipped settings (15 s poll)');
let exitCode = 1;

/**
 * Archive gets its messages once the account follows it (its cursor starts at the folder's UIDNEXT,
 * so they arrive as new mail, as a delivery agent's would), and the run starts when all are synced.
 */
async function fillBigFolder(accountId: string): Promise<void> {
  const imap = await openImap(mail.info(), 'alice');
  await imap.mailboxCreate('Archive').catch(() => undefined); // there already when the server makes it
  await imap.logout();
  await eventually(
    () =>
      service.mailQuery(
        accountId,
        'SELECT 1 FROM folders WHERE account_id = ? AND provider_id = ?',
        accountId,
        'Archive',
      ).length > 0,
    { what: 'Archive followed', timeoutMs: 60_000 },
  );
  fillMaildir(mail, 'alice', 'Archive', bigFolder, (i) => messageOf(i + 1));
  const started = Date.now();
  const count = () =>
    service.mailQuery<{ n: number }>(accountId, 'SELECT COUNT(*) AS n FROM emails WHERE account_id = ?', accountId)[0]
      ?.n ?? 0;
  await eventually(async () => count() >= bigFolder, {
    what: `${bigFolder} messages of Archive synced`,
    timeoutMs: 3_600_000,
    intervalMs: 2_000,
  });
  console.log(`soak: Archive of ${bigFolder} messages synced in ${Math.round((Date.now() - started) / 1000)} s`);
}

/** What the gateways and the Worker said last: set GATEWAY_LOG_LEVEL=debug for every pass. */
const printTails = () => {
  for (const [i, g] of service.gateways.entries())
    console.log(`--- gateway ${i} (tail) ---\n${g.log.slice(-150).join('\n')}`);
  console.log(`--- worker (tail) ---\n${service.workerLog.slice(-200).join('\n')}`);
};
try {
  const account = await connectMailbox(service, mail.info(), 'alice');
  if (bigFolder) await fillBigFolder(account.id);
  const figures = await runModel({
    seed,
    steps,
    checkEvery: 100,
    killEvery: 150,
    ...(minutes > 0 ? { stopAt: Date.now() + minutes * 60_000 } : {}),
    ...(bigFolder ? { firstModelId: bigFolder + 1, quiescenceMs } : {}),
    mail,
    service,
    user: 'alice',
    accountId: account.id,
    gateway,
    startGateway: () => service.startGateway('gw-soak', { NODE_EXTRA_CA_CERTS: mail.caFile, ...env }),
    log: (line) => console.log(line),
  });
  console.log(JSON.stringify(figures, null, 2));
  exitCode = figures.problems.length > 0 ? 1 : figures.gaveUp ? 2 : 0;
  if (figures.gaveUp) console.log(`soak: stopped early, ${figures.gaveUp}`);
  if (exitCode) printTails();
} catch (err) {
  // The run itself broke (the Worker or a server stopped answering): what they said last.
  console.log(`soak: the run broke: ${(err as Error).stack ?? err}`);
  printTails();
} finally {
  await stopEndToEnd({ mail, service });
}
process.exit(exitCode);
