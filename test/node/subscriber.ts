/** A webhook subscriber on loopback for end-to-end tests. */
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { checkEvent } from './contract.ts';

export interface SubscriberCall {
  headers: IncomingHttpHeaders;
  body: string;
  json: any;
}

/**
 * Listens on 127.0.0.1; every call is checked against the document's `webhooks` payload of its type,
 * recorded in `calls` (in arrival order) and answered 200.
 */
export async function startSubscriber(): Promise<{ url: string; calls: SubscriberCall[]; close(): Promise<void> }> {
  const calls: SubscriberCall[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      const json = JSON.parse(body);
      checkEvent(json);
      calls.push({ headers: req.headers, body, json });
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const address = server.address();
  const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/hook`;
  // Closed, connections are refused (what a subscriber that is down looks like).
  const close = () =>
    new Promise<void>((r) => {
      server.close(() => r());
      server.closeAllConnections();
    });
  return { url, calls, close };
}
