// A TCP proxy in front of a plain-text IMAP port that records what each client sends, line by line,
// and can hold one command back until the test lets it through.
import { tcpProxy } from './tcp-proxy.ts';

export interface ImapConnectionLog {
  /** The client's lines so far (commands and continuation lines, without CRLF). */
  sent: string[];
  /** The server's lines so far. */
  received: string[];
}

export interface HeldCommand {
  /** The connection the command was held on. */
  connection: ImapConnectionLog;
  /** Sends the held command, and whatever the client wrote after it, to the server. */
  release(): void;
}

export interface ImapProxy {
  port: number;
  connections: ImapConnectionLog[];
  /**
   * Holds the next client line for which `match(line, previousLine)` is true; resolves once one is
   * held. Nothing the client writes after it reaches the server before `release()`.
   */
  holdNext(match: (line: string, previous: string | undefined) => boolean): Promise<HeldCommand>;
  close(): void;
}

/** Splits a byte stream into lines; `onLine` gets each complete line with the bytes that made it. */
function lineReader(onLine: (line: string, bytes: Buffer) => void): (chunk: Buffer) => void {
  let partial = Buffer.alloc(0);
  return (chunk) => {
    partial = Buffer.concat([partial, chunk]);
    for (let end = partial.indexOf('\r\n'); end >= 0; end = partial.indexOf('\r\n')) {
      const bytes = partial.subarray(0, end + 2);
      partial = partial.subarray(end + 2);
      onLine(bytes.subarray(0, end).toString('utf8'), bytes);
    }
  };
}

export async function imapProxy(upstreamPort: number): Promise<ImapProxy> {
  let wanted: {
    match: (line: string, previous: string | undefined) => boolean;
    held: (h: HeldCommand) => void;
  } | null = null;
  const proxy: ImapProxy = {
    port: 0,
    connections: [],
    holdNext: (match) => new Promise((held) => (wanted = { match, held })),
    close: () => undefined,
  };
  const tcp = await tcpProxy(upstreamPort, (client, upstream) => {
    const log: ImapConnectionLog = { sent: [], received: [] };
    proxy.connections.push(log);
    /** Lines held back (the held command first), or null while lines flow. */
    let queue: Buffer[] | null = null;
    client.on(
      'data',
      lineReader((line, bytes) => {
        if (queue) {
          queue.push(bytes);
          return;
        }
        const waiting = wanted;
        if (waiting?.match(line, log.sent.at(-1))) {
          wanted = null;
          queue = [bytes];
          waiting.held({
            connection: log,
            release: () => {
              for (const part of queue ?? []) {
                log.sent.push(part.subarray(0, part.length - 2).toString('utf8'));
                upstream.write(part);
              }
              queue = null;
            },
          });
          return;
        }
        log.sent.push(line);
        upstream.write(bytes);
      }),
    );
    upstream.on(
      'data',
      lineReader((line, bytes) => {
        log.received.push(line);
        client.write(bytes);
      }),
    );
  });
  proxy.port = tcp.port;
  proxy.close = tcp.close;
  return proxy;
}
