// The control socket dies silently (no close frame, no FIN: a proxy in between stops passing bytes
// but keeps both TCP connections open). A gateway request started after that (here a verify, by
// POST /auth/intent) is carried by the socket the gateway opens next, and answered: the heartbeat
// notices the dead socket, the gateway reconnects, and the Worker moves the request over.
import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { connectMailbox, mailboxIntent } from './connect.ts';
import { eventually, type GatewayProcess, type Service, startService } from './service.ts';

const mail = inject('mailserver');
let service: Service;
let proxy: Proxy;
let gateway: GatewayProcess;

interface Proxy {
  url: string;
  /** Connections that carried a control socket upgrade. */
  controls: { dead: boolean }[];
  /** Stops passing bytes on every control connection, leaving the TCP connections open. */
  blackholeControls(): void;
  close(): void;
}

/** A TCP proxy in front of the Worker that can make a connection go silent. */
async function startProxy(targetPort: number): Promise<Proxy> {
  const sockets = new Set<Socket>();
  const controls: { client: Socket; upstream: Socket; dead: boolean }[] = [];
  const server: Server = createServer((client) => {
    const upstream = connect(targetPort, '127.0.0.1');
    const conn = { client, upstream, dead: false };
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => {});
    }
    // A closed side closes the other, except on a silenced connection: there nothing may reach the ends.
    client.on('close', () => conn.dead || upstream.destroy());
    upstream.on('close', () => conn.dead || client.destroy());
    // The upgrade may ride on a kept-alive connection that carried plain calls first.
    const watch = (chunk: Buffer) => {
      if (!chunk.toString('latin1').includes('GET /internal/gateway/connect')) return;
      controls.push(conn);
      client.off('data', watch);
    };
    client.on('data', watch);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    controls,
    blackholeControls() {
      for (const conn of controls) {
        if (conn.dead) continue;
        conn.dead = true;
        conn.client.unpipe(conn.upstream);
        conn.upstream.unpipe(conn.client);
        conn.client.pause();
        conn.upstream.pause();
      }
    },
    close() {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

beforeAll(async () => {
  service = await startService();
  proxy = await startProxy(Number(new URL(service.base).port));
  gateway = service.startGateway('gw-silent', { WORKER_URL: proxy.url, NODE_EXTRA_CA_CERTS: mail.caFile });
});

afterAll(async () => {
  proxy?.close();
  await service?.stop();
});

const opened = () => gateway.log.filter((line) => line.includes('control socket open')).length;

it('carries a request started after the control socket died silently on the next socket', async () => {
  // The socket works: a mailbox connects through it.
  const account = await connectMailbox(service, mail, 'erin');
  expect(proxy.controls).toHaveLength(1);
  expect(opened()).toBe(1);

  proxy.blackholeControls();
  // One request, no retry: a reconnect, which has the gateway verify the login over the control
  // socket. It starts on a socket that is already dead, and must be answered all the same.
  const reconnect = await service.api('POST', '/auth/intent', mailboxIntent(mail, 'erin', { account_id: account.id }));
  expect(reconnect.status, JSON.stringify(reconnect.body)).toBe(200);

  expect(gateway.log.some((line) => line.includes('control socket no heartbeat'))).toBe(true);
  expect(proxy.controls.length).toBeGreaterThanOrEqual(2);
  expect(proxy.controls[0]!.dead).toBe(true);
  await eventually(() => opened() >= 2, { what: 'the second socket in the log' });
});
