/** What an operator's tools do with a gateway: scrape /metrics, probe /healthz, cut the way to the Worker. */
import { createServer, connect, type Server, type Socket } from 'node:net';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses Prometheus text exposition (version 0.0.4): the samples, and each family's TYPE. */
export function parsePrometheus(text: string): { samples: Sample[]; types: Map<string, string> } {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) types.set(type[1]!, type[2]!);
    if (line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: \d+)?$/.exec(line);
    if (!match) throw new Error(`not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, value] of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[key!] = value!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    // Go's float syntax, as Prometheus reads it: NaN and Inf in any case.
    const raw = match[3]!;
    const value = /^nan$/i.test(raw)
      ? NaN
      : /^[+-]?inf$/i.test(raw)
        ? raw.startsWith('-')
          ? -Infinity
          : Infinity
        : Number(raw);
    if (Number.isNaN(value) && !/^nan$/i.test(raw)) throw new Error(`not a sample value: ${line}`);
    samples.push({ name: match[1]!, labels, value });
  }
  return { samples, types };
}

/** GET /metrics, parsed; `value(name, labels)` sums the matching samples (0 when none). */
export async function scrape(base: string) {
  const response = await fetch(`${base}/metrics`);
  if (response.status !== 200) throw new Error(`/metrics answered ${response.status}`);
  const contentType = response.headers.get('content-type') ?? '';
  const parsed = parsePrometheus(await response.text());
  const value = (name: string, labels: Record<string, string> = {}) =>
    parsed.samples
      .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
      .reduce((n, s) => n + s.value, 0);
  return { ...parsed, contentType, value };
}

export async function healthz(base: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${base}/healthz`);
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** A TCP relay to `target` that can be cut (connections refused, open ones dropped) and restored. */
export interface Relay {
  port: number;
  cut(): Promise<void>;
  restore(): Promise<void>;
  close(): Promise<void>;
}

export async function startRelay(targetPort: number, host = '127.0.0.1'): Promise<Relay> {
  const sockets = new Set<Socket>();
  let server: Server;
  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      server = createServer((socket) => {
        const upstream = connect(targetPort, host);
        for (const s of [socket, upstream]) {
          sockets.add(s);
          s.on('close', () => sockets.delete(s));
          s.on('error', () => undefined);
        }
        socket.pipe(upstream).pipe(socket);
        socket.on('close', () => upstream.destroy());
        upstream.on('close', () => socket.destroy());
      });
      server.once('error', reject);
      server.listen(port, host, () => {
        const address = server.address();
        resolve(typeof address === 'object' && address ? address.port : port);
      });
    });
  const stop = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      for (const s of sockets) s.destroy();
    });
  const port = await listen(0);
  return {
    port,
    cut: stop,
    restore: async () => {
      await listen(port);
    },
    close: stop,
  };
}
