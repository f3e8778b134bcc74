/**
 * The gateway's instrumentation, in one place: the rest of the gateway calls the small functions
 * below at the moment something happens, and they cost nothing unless the operator set
 * GATEWAY_HTTP_PORT. Then `enableMetrics` loads prom-client (from node_modules, never in the
 * bundle: about 2 MiB of heap a gateway without the port does not pay) and the counters start.
 *
 * Labels are fixed, small sets (a change kind, an error class, a send outcome): never an account,
 * an address or anything from a message.
 */
import type { Registry } from 'prom-client';
import type { Change } from '../common/relay.ts';
import { failureClass, type FailureClass } from './errors.ts';

/** What the gateway reports about itself, read at each scrape and each health probe. */
export interface GatewayState {
  gatewayId: string;
  version: string;
  /** Accounts held now. */
  accounts: number;
  /** When the Worker last answered a heartbeat (epoch ms; null: never yet). */
  lastHeartbeatAt: number | null;
  /** Whether the last heartbeat reached the Worker (false after one that failed for good). */
  workerReachable: boolean;
  /** How long a lease lasts: a heartbeat answer older than this means the Worker is out of reach. */
  leaseTtlMs: number;
}

export type SendOutcomeLabel = 'sent' | 'failed' | 'unknown';

interface Sink {
  relayed(kind: string, count: number): void;
  poll(): void;
  workerCall(call: string): void;
  relaySeconds(seconds: number): void;
  error(kind: FailureClass): void;
  send(outcome: SendOutcomeLabel): void;
}

let sink: Sink | null = null;
/** IMAP connections open now; kept always (the health answer reports it too). */
let imapConnections = 0;

/** A connected IMAP client: counted until it closes. */
export function trackImapConnection(client: { once(event: 'close', listener: () => void): unknown }): void {
  imapConnections++;
  client.once('close', () => imapConnections--);
}

export function imapConnectionCount(): number {
  return imapConnections;
}

/** A batch of changes the Worker accepted: counted by kind (a `messages` change counts its messages). */
export function countRelayed(changes: readonly Change[]): void {
  if (!sink) return;
  for (const change of changes) sink.relayed(change.type, change.type === 'messages' ? change.messages.length : 1);
}

/** A poll of an account's folder list (gateway/poll.ts). */
export function countPoll(): void {
  sink?.poll();
}

/** A call to the Worker (heartbeat, changes, status, lease, …), retries included. */
export function countWorkerCall(call: string): void {
  sink?.workerCall(call);
}

/** From a server's notification to the Worker's answer for the mail it announced. */
export function observeRelay(startedAt: number): void {
  sink?.relaySeconds((performance.now() - startedAt) / 1000);
}

/** A connection, login or Worker call that failed; classified by `failureClass`. */
export function countFailure(err: unknown): void {
  sink?.error(failureClass(err));
}

/** A send's outcome, once known (`unknown`: the link broke while the server may have taken it). */
export function countSend(result: Promise<unknown>): void {
  if (!sink) return;
  const record = sink.send.bind(sink);
  result.then(
    () => record('sent'),
    (err: unknown) => record((err as { mayHaveSent?: unknown })?.mayHaveSent === true ? 'unknown' : 'failed'),
  );
}

/** Seconds since the Worker last answered a heartbeat (null before the first answer). */
export function heartbeatAge(state: GatewayState, now = Date.now()): number | null {
  return state.lastHeartbeatAt === null ? null : (now - state.lastHeartbeatAt) / 1000;
}

/** Whether the Worker answers: the last heartbeat got through and its answer is younger than a lease. */
export function workerReachable(state: GatewayState, now = Date.now()): boolean {
  const age = heartbeatAge(state, now);
  return state.workerReachable && age !== null && age * 1000 < state.leaseTtlMs;
}

/** Loads prom-client and starts counting; the registry serves GET /metrics. */
export async function enableMetrics(state: () => GatewayState): Promise<Registry> {
  const client = await import('prom-client');
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry });
  const registers = [registry];
  new client.Gauge({
    name: 'mailbox_gateway_accounts',
    help: 'Accounts this gateway holds',
    registers,
    collect() {
      this.set(state().accounts);
    },
  });
  new client.Gauge({
    name: 'mailbox_gateway_imap_connections',
    help: 'IMAP connections open',
    registers,
    collect() {
      this.set(imapConnections);
    },
  });
  new client.Gauge({
    name: 'mailbox_gateway_heartbeat_age_seconds',
    help: 'Seconds since the Worker last answered a heartbeat (-1: not yet)',
    registers,
    collect() {
      this.set(heartbeatAge(state()) ?? -1);
    },
  });
  new client.Gauge({
    name: 'mailbox_gateway_info',
    help: 'The gateway build: 1, labelled with its version',
    labelNames: ['version'],
    registers,
    collect() {
      this.set({ version: state().version }, 1);
    },
  });
  const relayed = new client.Counter({
    name: 'mailbox_gateway_changes_relayed_total',
    help: 'Changes the Worker accepted, by kind (messages: each message)',
    labelNames: ['kind'],
    registers,
  });
  const relaySeconds = new client.Histogram({
    name: 'mailbox_gateway_relay_seconds',
    help: "From a server's new-mail notification to the Worker's answer for that mail",
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers,
  });
  const polls = new client.Counter({
    name: 'mailbox_gateway_polls_total',
    help: "Polls of an account's folder list (each LIST-STATUS)",
    registers,
  });
  const workerCalls = new client.Counter({
    name: 'mailbox_gateway_worker_calls_total',
    help: 'Calls to the Worker, by call (heartbeat, changes, status, lease, ...), retries included',
    labelNames: ['call'],
    registers,
  });
  const errors = new client.Counter({
    name: 'mailbox_gateway_errors_total',
    help: 'Failed connections, logins and Worker calls, by class',
    labelNames: ['class'],
    registers,
  });
  const sends = new client.Counter({
    name: 'mailbox_gateway_sends_total',
    help: 'Sends carried out, by outcome (unknown: the link broke mid-transaction)',
    labelNames: ['outcome'],
    registers,
  });
  // Every class and outcome from the start, so that a rate over them never misses its first step.
  for (const kind of ['auth', 'network', 'tls', 'protocol', 'worker'] satisfies FailureClass[])
    errors.inc({ class: kind }, 0);
  for (const outcome of ['sent', 'failed', 'unknown'] satisfies SendOutcomeLabel[]) sends.inc({ outcome }, 0);
  sink = {
    relayed: (kind, count) => relayed.inc({ kind }, count),
    poll: () => polls.inc(),
    workerCall: (call) => workerCalls.inc({ call }),
    relaySeconds: (seconds) => relaySeconds.observe(seconds),
    error: (kind) => errors.inc({ class: kind }),
    send: (outcome) => sends.inc({ outcome }),
  };
  return registry;
}
