// A TCP proxy in front of an SMTP server that holds the server's reply to a message body.
import { tcpProxy } from './tcp-proxy.ts';

export interface SlowProxy {
  port: number;
  /** Replies held so far (one per message body). */
  held: number;
  /** How long the next replies are held, and after how many bytes from the client (may be changed between tests). */
  holdMs: number;
  threshold: number;
  close(): void;
}

/**
 * A TCP proxy (TLS passes through untouched) that, each time the client sent more than `threshold`
 * bytes on a connection since the last hold, holds what the server says next for `holdMs` (keep it
 * well under nodemailer's socket timeout): the end-of-DATA reply. The server has the message by then.
 */
export async function slowProxy(upstreamPort: number, threshold: number, holdMs: number): Promise<SlowProxy> {
  const proxy: SlowProxy = { port: 0, held: 0, holdMs, threshold, close: () => undefined };
  const tcp = await tcpProxy(upstreamPort, (client, upstream) => {
    let sent = 0;
    let releaseAt = 0;
    const queue: Buffer[] = [];
    client.on('data', (chunk: Buffer) => {
      sent += chunk.length;
      if (Date.now() >= releaseAt && sent > proxy.threshold) {
        sent = 0;
        releaseAt = Date.now() + proxy.holdMs;
        proxy.held += 1;
        setTimeout(() => {
          for (const part of queue.splice(0)) client.write(part);
        }, proxy.holdMs);
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (Date.now() < releaseAt) queue.push(chunk);
      else client.write(chunk);
    });
  });
  proxy.port = tcp.port;
  proxy.close = tcp.close;
  return proxy;
}
