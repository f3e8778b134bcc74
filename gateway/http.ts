/**
 * The operator's window on a gateway (GATEWAY_HTTP_PORT; off unless set): GET /healthz for a
 * supervisor's probe, GET /metrics for Prometheus. Nothing else is served, and nothing here changes
 * the gateway. Bound to 127.0.0.1 unless GATEWAY_HTTP_HOST says otherwise (a container exposing it
 * sets 0.0.0.0).
 */
import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';
import { enableMetrics, heartbeatAge, imapConnectionCount, workerReachable, type GatewayState } from './metrics.ts';

/** The health answer: 200 while the Worker answers heartbeats, 503 otherwise. */
export function health(state: GatewayState): { status: number; body: Record<string, unknown> } {
  const reachable = workerReachable(state);
  const age = heartbeatAge(state);
  return {
    status: reachable ? 200 : 503,
    body: {
      status: reachable ? 'ok' : 'worker_unreachable',
      gateway_id: state.gatewayId,
      version: state.version,
      accounts: state.accounts,
      imap_connections: imapConnectionCount(),
      heartbeat_age_seconds: age === null ? null : Math.round(age * 10) / 10,
    },
  };
}

/** Starts the server; resolves once it listens (rejects when the port is taken). */
export async function startHttp(port: number, host: string, state: () => GatewayState): Promise<Server> {
  const registry: Registry = await enableMetrics(state);
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
    } else if (path === '/healthz') {
      const { status, body } = health(state());
      res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      res.end(JSON.stringify(body));
    } else if (path === '/metrics') {
      registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
        () => res.writeHead(500).end(),
      );
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('GET /healthz or /metrics\n');
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}
