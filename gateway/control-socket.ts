/**
 * The control WebSocket on which the Worker sends the gateway requests (sends, mailbox commands):
 * kept open, reconnected with backoff, pinged so a silently dropped connection is noticed, and
 * every request answered once, however often the Worker sends it again.
 */
import type { GatewayRequest, GatewayToWorker, WorkerToGateway } from '../common/relay.ts';
import { DEAD_AFTER_MS, PING, PING_INTERVAL_MS, PONG } from '../common/heartbeat.ts';
import { GATEWAY_SIGNATURE_HEADER, signRequest } from '../common/signing.ts';
import { backoffDelay, sleep } from './async.ts';
import { GatewayError } from './errors.ts';
import { errorFields, type Logger } from './log.ts';
import { parseChecked, relayCheck } from './relay-checks.ts';

/** How long an answer is kept for a request sent again (the Worker gives up on a request within minutes). */
const REMEMBER_ANSWERS_MS = 10 * 60_000;
const checkWorkerToGateway = relayCheck('WorkerToGateway');

export interface ControlSocketOptions {
  base: URL;
  secret: string;
  gatewayId: string;
  /** This process, among any that use the same gateway id. */
  instance: string;
  log: Logger;
}

export class ControlSocket {
  #opts: ControlSocketOptions;
  /** Control requests by id: running, or answered (kept REMEMBER_ANSWERS_MS). */
  #requests = new Map<string, { reply: Promise<GatewayToWorker>; finishedAt: number | null }>();

  constructor(opts: ControlSocketOptions) {
    this.#opts = opts;
  }

  /**
   * Keeps the control WebSocket open until `signal` aborts, reconnecting with backoff and jitter.
   * Every request is handed to `handle`; its result (or GatewayError) is the answer.
   */
  async run(
    handle: (request: GatewayRequest) => Promise<unknown>,
    signal: AbortSignal,
    retry: { minMs: number; maxMs: number } = { minMs: 1_000, maxMs: 60_000 },
  ): Promise<void> {
    for (let attempt = 0; !signal.aborted; ) {
      const opened = await this.#connectOnce(handle, signal);
      attempt = opened ? 0 : attempt + 1;
      if (signal.aborted) break;
      await sleep(backoffDelay(attempt, retry.minMs, retry.maxMs), signal);
    }
  }

  /**
   * One socket's life; resolves when it closes or is found dead, with whether it had opened. The
   * upgrade is signed in headers with a one-time nonce (nothing replayable in the URL). Every
   * PING_INTERVAL_MS it pings; DEAD_AFTER_MS without a word from the Worker (a silently dropped
   * connection) ends it without waiting for a close handshake that will never come.
   */
  async #connectOnce(handle: (request: GatewayRequest) => Promise<unknown>, signal: AbortSignal): Promise<boolean> {
    const url = new URL('/internal/gateway/connect', this.#opts.base);
    url.search = new URLSearchParams({ gateway_id: this.#opts.gatewayId, instance: this.#opts.instance }).toString();
    const signature = await signRequest(this.#opts.secret, {
      method: 'GET',
      path: url.pathname + url.search,
      body: '',
    });
    url.protocol = this.#opts.base.protocol === 'https:' ? 'wss:' : 'ws:';
    const ws = new WebSocket(url, { headers: { [GATEWAY_SIGNATURE_HEADER]: signature } });
    let opened = false;
    let heardAt = Date.now();
    let ended: (why: string) => void = () => {};
    const end = new Promise<string>((resolve) => {
      ended = resolve;
    });
    // 1000: a client may not send 1001 (undici throws); the Worker takes 1000 as a clean close too.
    // A stopping gateway does not wait for the close handshake.
    const onAbort = () => {
      ws.close(1000, 'gateway stopping');
      ended('stopping');
    };
    signal.addEventListener('abort', onAbort, { once: true });
    ws.addEventListener('open', () => {
      opened = true;
      heardAt = Date.now();
      this.#opts.log.info('control socket open');
    });
    ws.addEventListener('message', (event) => {
      heardAt = Date.now();
      if (event.data === PONG) return;
      void this.#answer(ws, event.data, handle);
    });
    ws.addEventListener('close', () => ended('closed'), { once: true });
    const heartbeat = setInterval(() => {
      if (Date.now() - heardAt > DEAD_AFTER_MS) {
        ended('no heartbeat');
        return;
      }
      if (ws.readyState === WebSocket.OPEN) ws.send(PING);
    }, PING_INTERVAL_MS);
    const why = await end;
    clearInterval(heartbeat);
    signal.removeEventListener('abort', onAbort);
    if (why !== 'closed' && why !== 'stopping') {
      // Half-open: a close frame would wait for an answer that never comes. Let it go in the background.
      try {
        ws.close(4000, why);
      } catch {
        // already closing
      }
    }
    if (!signal.aborted) this.#opts.log.warn(opened ? `control socket ${why}` : 'control socket could not connect');
    return opened;
  }

  /**
   * Answers a request. A request id seen before (the Worker sends a request again on a new socket
   * when the old one died before answering) gets the first run's answer: it is never run twice.
   */
  async #answer(ws: WebSocket, data: unknown, handle: (request: GatewayRequest) => Promise<unknown>): Promise<void> {
    const parsed = parseChecked(String(data), checkWorkerToGateway);
    if (!parsed.ok) {
      this.#opts.log.warn('control socket: ignored a malformed message', { problem: parsed.problem.slice(0, 200) });
      return;
    }
    const message = parsed.value;
    this.#forgetOldRequests();
    let run = this.#requests.get(message.id);
    if (!run) {
      run = { reply: this.#run(message, handle), finishedAt: null };
      const entry = run;
      void entry.reply.then(() => {
        entry.finishedAt = Date.now();
      });
      this.#requests.set(message.id, run);
    }
    const reply = await run.reply;
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(reply));
  }

  async #run(
    message: WorkerToGateway,
    handle: (request: GatewayRequest) => Promise<unknown>,
  ): Promise<GatewayToWorker> {
    try {
      return { type: 'response', id: message.id, ok: true, result: await handle(message.request) };
    } catch (err) {
      const known = err instanceof GatewayError;
      if (!known) this.#opts.log.error('control request failed', { op: message.request.op, ...errorFields(err) });
      return {
        type: 'response',
        id: message.id,
        ok: false,
        error: known
          ? { kind: err.kind, detail: err.message, ...(err.mayHaveSent ? { may_have_sent: true } : {}) }
          : { kind: 'unexpected_error', detail: 'the gateway failed to handle the request' },
      };
    }
  }

  /** Answers are kept long enough for any re-sent request (the Worker gives up on a request within minutes). */
  #forgetOldRequests(): void {
    const before = Date.now() - REMEMBER_ANSWERS_MS;
    for (const [id, run] of this.#requests)
      if (run.finishedAt !== null && run.finishedAt < before) this.#requests.delete(id);
  }
}
