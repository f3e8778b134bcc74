// The plumbing of the tests' TCP proxies: a local port whose every connection gets its own
// connection to the upstream port; the caller decides what flows between the two.
import net from 'node:net';

export interface TcpProxy {
  port: number;
  /** Closes the port and every connection through it. */
  close(): void;
}

/**
 * Listens on a free local port; for each client, connects to `upstreamPort` and hands both sockets
 * to `wire`, which forwards what it wants. Either side ending or failing ends both.
 */
export async function tcpProxy(
  upstreamPort: number,
  wire: (client: net.Socket, upstream: net.Socket) => void,
): Promise<TcpProxy> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(upstreamPort, '127.0.0.1');
    sockets.add(client).add(upstream);
    wire(client, upstream);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}
