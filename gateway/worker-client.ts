/**
 * The gateway's side of common/relay.ts: signed JSON POSTs to the Worker, and the control
 * WebSocket on which the Worker sends requests.
 */
import type {
  AccountStatus,
  Change,
  ChangesRequest,
  ChangesResponse,
  GatewayRequest,
  GatewayToWorker,
  HeartbeatRequest,
  HeartbeatResponse,
  LeaseRequest,
  LeaseResponse,
  OutgoingMessage,
  ReleaseRequest,
  SendOutcome,
  StatusRequest,
  WorkerToGateway,
} from '../common/relay.ts';
import { GATEWAY_ID_IN_USE_TYPE, LEASE_LOST_TYPE, STAGE_PART_BYTES } from '../common/relay-limits.ts';
import { relayCheck } from './relay-checks.ts';
import { randomUUID } from 'node:crypto';
import { DEAD_AFTER_MS, PING, PING_INTERVAL_MS, PONG } from '../common/heartbeat.ts';
import { GATEWAY_SIGNATURE_HEADER, signRequest } from '../common/signing.ts';
import { backoffDelay, sleep } from './async.ts';
import { GatewayError, WorkerFailure } from './errors.ts';
import { errorFields, type Logger } from './log.ts';
import { countRelayed, countWorkerCall } from './metrics.ts';
import { nextStamp } from './stamps.ts';
import { GATEWAY_VERSION } from './version.ts';

const REQUEST_TIMEOUT_MS = 60_000;
/** How long a control request's answer is kept for a repeat of the same request id. */
const REMEMBER_ANSWERS_MS = 10 * 60_000;
const RETRY_MIN_MS = 250;
const RETRY_MAX_MS = 30_000;

const checkHeartbeatResponse = relayCheck('HeartbeatResponse');
const checkLeaseResponse = relayCheck('LeaseResponse');
const checkChangesResponse = relayCheck('ChangesResponse');
const checkOutgoingMessage = relayCheck('OutgoingMessage');
const checkStagedUpload = relayCheck('StagedUpload');
const checkStagedPart = relayCheck('StagedPart');
const checkWorkerToGateway = relayCheck('WorkerToGateway');

/** A non-retryable answer (4xx) from the Worker. */
export class WorkerHttpError extends WorkerFailure {
  readonly status: number;
  readonly type: string | null;
  constructor(status: number, type: string | null, path: string) {
    super(`worker answered ${status}${type ? ` ${type}` : ''} to ${path}`);
    this.status = status;
    this.type = type;
  }
}

/** Another live process uses this gateway id: the Worker refuses this one until that one stops. */
export function isGatewayIdInUse(err: unknown): boolean {
  return err instanceof WorkerHttpError && err.status === 409 && err.type === GATEWAY_ID_IN_USE_TYPE;
}

/** The account is no longer ours: its lease moved on (409 lease_lost) or it no longer exists (404). */
export function isLeaseLost(err: unknown): boolean {
  return err instanceof WorkerHttpError && ((err.status === 409 && err.type === LEASE_LOST_TYPE) || err.status === 404);
}

export class Aborted extends Error {}

export interface PostOptions {
  signal?: AbortSignal;
  /** Give up after this many attempts (default: retry until `signal` aborts). */
  attempts?: number;
}

/** A session's stream of change batches for its account (`ChangesSequence`). */
export interface ChangeStream {
  id: string;
  next: number;
  /** The session's epoch: above every earlier session's of this process (and, by the clock, of the one before it). */
  session: number;
}

/** The stream of a new session: its epoch grows with every session (gateway/stamps.ts). */
export function newChangeStream(): ChangeStream {
  return { id: randomUUID(), next: 0, session: nextStamp() };
}

export class WorkerClient {
  readonly gatewayId: string;
  /** This process, among any that use the same gateway id (only one may at a time). */
  readonly instance = crypto.randomUUID();
  #base: URL;
  #secret: string;
  #log: Logger;
  /** Each account's stream of change batches, for calls without a session's own (see `changes`). */
  #streams = new Map<string, ChangeStream>();
  /** Control requests by id: running, or answered (kept REMEMBER_ANSWERS_MS). */
  #requests = new Map<string, { reply: Promise<GatewayToWorker>; finishedAt: number | null }>();

  constructor(opts: { workerUrl: URL; secret: string; gatewayId: string; log: Logger }) {
    this.#base = opts.workerUrl;
    this.#secret = opts.secret;
    this.gatewayId = opts.gatewayId;
    this.#log = opts.log;
  }

  heartbeat(held: string[], capacity: number, opts?: PostOptions): Promise<HeartbeatResponse> {
    const body: HeartbeatRequest = {
      gateway_id: this.gatewayId,
      instance: this.instance,
      held,
      capacity,
      version: GATEWAY_VERSION,
    };
    return this.#post('/internal/gateway/heartbeat', body, checkHeartbeatResponse, opts);
  }

  /** Gives leases up at once, for other gateways to take (`stopping`: this gateway takes no more). */
  async release(accounts: string[], stopping: boolean, opts?: PostOptions): Promise<void> {
    const body: ReleaseRequest = { gateway_id: this.gatewayId, instance: this.instance, accounts, stopping };
    await this.#post('/internal/gateway/release', body, null, opts);
  }

  lease(accountId: string, opts?: PostOptions): Promise<LeaseResponse> {
    const body: LeaseRequest = { gateway_id: this.gatewayId, instance: this.instance };
    return this.#post(`${accountPath(accountId)}/lease`, body, checkLeaseResponse, opts);
  }

  /**
   * One batch of changes, numbered in its account's stream (`ChangesSequence`): calls may overlap,
   * the Worker applies them in the order they were made. A batch that fails for good ends the
   * stream, so the next one starts a new stream. Its cost is logged at debug level (`relay
   * changes`: what `npm run bench sync` sums).
   */
  async changes(accountId: string, changes: Change[], opts?: PostOptions & { stream?: ChangeStream }) {
    const start = performance.now();
    const stream = opts?.stream ?? this.#streams.get(accountId) ?? newChangeStream();
    if (!opts?.stream) this.#streams.set(accountId, stream);
    const sequence = { stream: stream.id, n: stream.next++, session: stream.session };
    const body = JSON.stringify({ gateway_id: this.gatewayId, changes, sequence } satisfies ChangesRequest);
    const encoded = performance.now();
    let response: ChangesResponse;
    try {
      response = await this.#send(
        'POST',
        `${accountPath(accountId)}/changes`,
        body,
        'application/json',
        checkChangesResponse,
        opts,
      );
    } catch (err) {
      if (this.#streams.get(accountId) === stream) this.#streams.delete(accountId);
      // The session's next batch starts a new stream (same session).
      if (opts?.stream === stream) Object.assign(stream, { id: randomUUID(), next: 0 });
      throw err;
    }
    const messages = changes.reduce((n, c) => n + (c.type === 'messages' ? c.messages.length : 0), 0);
    if (messages)
      this.#log.debug('relay changes', {
        account: accountId,
        messages,
        bytes: body.length,
        encode_ms: Math.round((encoded - start) * 10) / 10,
        round_trip_ms: Math.round((performance.now() - encoded) * 10) / 10,
      });
    countRelayed(changes);
    return response;
  }

  async status(accountId: string, status: AccountStatus, error: string | null, opts?: PostOptions): Promise<void> {
    const body: StatusRequest = { gateway_id: this.gatewayId, status, error: error?.slice(0, 1000) ?? null };
    await this.#post(`${accountPath(accountId)}/status`, body, null, opts);
  }

  /** What became of a send (see `SendOutcome`). */
  async sendOutcome(accountId: string, outcome: SendOutcome, opts?: PostOptions): Promise<void> {
    await this.#post(`${accountPath(accountId)}/outcomes`, outcome, null, opts);
  }

  /** A composed message waiting to be sent (signed GET, see the `send` request). */
  async outgoing(accountId: string, name: string): Promise<OutgoingMessage> {
    const url = new URL(`${accountPath(accountId)}/outgoing/${encodeURIComponent(name)}`, this.#base);
    const signature = await signRequest(this.#secret, { method: 'GET', path: url.pathname + url.search, body: '' });
    const res = await fetch(url, {
      headers: { [GATEWAY_SIGNATURE_HEADER]: signature },
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    const text = await res.text();
    if (!res.ok) throw new WorkerHttpError(res.status, errorType(text), url.pathname);
    const body = parseChecked(text, checkOutgoingMessage);
    if (!body.ok) throw new Error(`invalid outgoing message from the Worker: ${body.problem}`);
    return body.value;
  }

  /**
   * Stores a large message source with the Worker before the change that names it (see
   * `MessageIn.staged`): the raw bytes, no JSON, signed over their SHA-256.
   */
  async stageSource(accountId: string, sha256: string, source: Uint8Array, opts?: PostOptions): Promise<void> {
    const path = `${accountPath(accountId)}/sources/${sha256}`;
    if (source.byteLength <= STAGE_PART_BYTES) {
      await this.#send('PUT', path, source, 'message/rfc822', null, opts);
      return;
    }
    // A very large source goes in parts (an R2 multipart upload), none larger than a part.
    const { upload_id } = await this.#post(`${path}/uploads`, {}, checkStagedUpload, opts);
    const upload = `${path}/uploads/${encodeURIComponent(upload_id)}`;
    const parts: { part: number; etag: string }[] = [];
    for (let offset = 0, part = 1; offset < source.byteLength; offset += STAGE_PART_BYTES, part++) {
      const bytes = source.subarray(offset, offset + STAGE_PART_BYTES);
      const { etag } = await this.#send(
        'PUT',
        `${upload}/${part}`,
        bytes,
        'application/octet-stream',
        checkStagedPart,
        opts,
      );
      parts.push({ part, etag });
    }
    await this.#post(`${upload}/complete`, { parts }, null, opts);
  }

  #post<T>(path: string, payload: unknown, check: ((value: unknown) => T) | null, opts: PostOptions = {}) {
    return this.#send('POST', path, JSON.stringify(payload), 'application/json', check, opts);
  }

  /** Retries network failures, 5xx and 429 with backoff; 4xx throws WorkerHttpError; abort throws Aborted. */
  async #send<T>(
    method: 'POST' | 'PUT',
    path: string,
    body: string | Uint8Array,
    contentType: string,
    check: ((value: unknown) => T) | null,
    opts: PostOptions = {},
  ): Promise<T> {
    const url = new URL(path, this.#base);
    for (let attempt = 0; ; attempt++) {
      if (opts.signal?.aborted) throw new Aborted(`aborted: ${path}`);
      countWorkerCall(callName(path));
      let failure: string;
      try {
        const signature = await signRequest(this.#secret, { method, path: url.pathname + url.search, body });
        const signals = [AbortSignal.timeout(REQUEST_TIMEOUT_MS), ...(opts.signal ? [opts.signal] : [])];
        const res = await fetch(url, {
          method,
          headers: { 'content-type': contentType, [GATEWAY_SIGNATURE_HEADER]: signature },
          body,
          signal: AbortSignal.any(signals),
        });
        const text = await res.text();
        if (res.ok) {
          if (!check) return undefined as T;
          const body = parseChecked(text, check);
          if (body.ok) return body.value;
          failure = `invalid response body from ${path}: ${body.problem}`;
        } else if (res.status >= 500 || res.status === 429) {
          failure = `status ${res.status}`;
        } else {
          throw new WorkerHttpError(res.status, errorType(text), url.pathname);
        }
      } catch (err) {
        if (err instanceof WorkerHttpError) throw err;
        if (opts.signal?.aborted) throw new Aborted(`aborted: ${path}`);
        failure = err instanceof Error ? err.message : String(err);
      }
      if (opts.attempts !== undefined && attempt + 1 >= opts.attempts)
        throw new WorkerFailure(`worker request ${path} failed: ${failure}`);
      const delay = backoffDelay(attempt, RETRY_MIN_MS, RETRY_MAX_MS);
      this.#log.warn('worker request failed, retrying', {
        path: url.pathname,
        failure: failure.slice(0, 200),
        retry_in_ms: delay,
      });
      await sleep(delay, opts.signal);
    }
  }

  /**
   * Keeps the control WebSocket open until `signal` aborts, reconnecting with backoff and jitter.
   * Every request is handed to `handle`; its result (or GatewayError) is the answer.
   */
  async runControlSocket(
    handle: (request: GatewayRequest) => Promise<unknown>,
    signal: AbortSignal,
    retry = { minMs: 1_000, maxMs: 60_000 },
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
    const url = new URL('/internal/gateway/connect', this.#base);
    url.search = new URLSearchParams({ gateway_id: this.gatewayId, instance: this.instance }).toString();
    const signature = await signRequest(this.#secret, { method: 'GET', path: url.pathname + url.search, body: '' });
    url.protocol = this.#base.protocol === 'https:' ? 'wss:' : 'ws:';
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
      this.#log.info('control socket open');
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
    if (!signal.aborted) this.#log.warn(opened ? `control socket ${why}` : 'control socket could not connect');
    return opened;
  }

  /**
   * Answers a request. A request id seen before (the Worker sends a request again on a new socket
   * when the old one died before answering) gets the first run's answer: it is never run twice.
   */
  async #answer(ws: WebSocket, data: unknown, handle: (request: GatewayRequest) => Promise<unknown>): Promise<void> {
    const parsed = parseChecked(String(data), checkWorkerToGateway);
    if (!parsed.ok) {
      this.#log.warn('control socket: ignored a malformed message', { problem: parsed.problem.slice(0, 200) });
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
      if (!known) this.#log.error('control request failed', { op: message.request.op, ...errorFields(err) });
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

/**
 * A JSON body checked against its relay schema. The problem named never quotes the body (a lease
 * answer carries passwords): the parser's own message would, so it is left out.
 */
function parseChecked<T>(
  text: string,
  check: (value: unknown) => T,
): { ok: true; value: T } | { ok: false; problem: string } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, problem: 'not JSON' };
  }
  try {
    return { ok: true, value: check(value) };
  } catch (err) {
    return { ok: false, problem: err instanceof Error ? err.message : String(err) };
  }
}

/** The call a relay path names: `/internal/gateway/heartbeat` → heartbeat, `…/accounts/<id>/changes` → changes. */
function callName(path: string): string {
  const parts = path.split('/');
  return (parts[3] === 'accounts' ? parts[5] : parts[3]) ?? 'other';
}

function accountPath(accountId: string): string {
  return `/internal/gateway/accounts/${encodeURIComponent(accountId)}`;
}

function errorType(text: string): string | null {
  try {
    const type = (JSON.parse(text) as { type?: unknown }).type;
    return typeof type === 'string' ? type : null;
  } catch {
    return null;
  }
}
