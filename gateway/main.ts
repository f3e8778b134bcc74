/**
 * Entry point: `node gateway/main.ts` (or `npm run gateway`).
 * Required env: WORKER_URL, GATEWAY_SECRET. Optional: GATEWAY_ID, GATEWAY_CAPACITY, GATEWAY_LOG_LEVEL,
 * GATEWAY_LOG_FORMAT, GATEWAY_HTTP_PORT and GATEWAY_HTTP_HOST (health and metrics, gateway/http.ts)
 * ALLOW_PRIVATE_MAIL_HOSTS ("true": mail hosts may resolve to private addresses, mail-hosts.ts)
 * and the tuning variables of config.ts. SIGTERM/SIGINT close every connection, hand the leases
 * back (the other gateways take the accounts at once) and exit 0.
 */
import { ConfigError, loadConfig } from './config.ts';
import { Gateway } from './gateway.ts';
import { createLogger, errorFields } from './log.ts';
import { configureMailHosts } from './mail-hosts.ts';

let config: ReturnType<typeof loadConfig>;
try {
  config = loadConfig(process.env);
} catch (err) {
  if (!(err instanceof ConfigError)) throw err;
  process.stderr.write(`gateway: ${err.message}\n`);
  process.exit(1);
}

configureMailHosts({ allowPrivate: process.env.ALLOW_PRIVATE_MAIL_HOSTS === 'true' });
const log = createLogger(config.logLevel, { gateway: config.gatewayId }, undefined, config.logFormat);
const gateway = new Gateway(config, log);
if (config.http) {
  const { port, host } = config.http;
  try {
    // Loaded only when asked for: a gateway without the port never loads prom-client.
    const { startHttp } = await import('./http.ts');
    await startHttp(port, host, () => gateway.state());
    log.info('health and metrics listening', { address: `${host}:${port}` });
  } catch (err) {
    log.error('could not serve health and metrics', { address: `${host}:${port}`, ...errorFields(err) });
    process.exit(1);
  }
}
gateway.start();

let stopping = false;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    log.info('stopping', { signal });
    // Closing sockets and releasing the leases is quick; do not let a stuck close keep the process alive.
    setTimeout(() => process.exit(0), 8_000).unref();
    gateway.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error('stop failed', errorFields(err));
        process.exit(0);
      },
    );
  });
}

process.on('unhandledRejection', (err) => log.error('unhandled rejection', errorFields(err)));
