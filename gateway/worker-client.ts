/**
 * The gateway's side of common/relay.ts: signed JSON POSTs to the Worker (retried with backoff),
 * and the control WebSocket on which the Worker sends requests (control-socket.ts).
 */
import type {
  AccountStatus,
  Change,
  ChangesRequest,
  ChangesResponse,
  GatewayRequest,
  HeartbeatRequest,
  HeartbeatResponse,
  LeaseRequest,
  LeaseResponse,
  OutgoingMessage,
  ReleaseRequest,
  SendOutcome,
  StatusRequest,
} from '../common/relay.ts';
import { GATEWAY_ID_IN_USE_TYPE, LEASE_LOST_TYPE, STAGE_PART_BYTES } from '../common/relay-limits.ts';
import { parseChecked, relayCheck } from './relay-checks.ts';
import { ControlSocket } from './control-socket.ts';
import { randomUUID } from 'node:crypto';
import { GATEWAY_SIGNATURE_HEADER, signRequest } from '../common/signing.ts';
import { backoffDelay, sleep } from './async.ts';
import { WorkerFailure } from './errors.ts';
import type { Logger } from './log.ts';
import { countRelayed, countWorkerCall } from './metrics.ts';
import { nextStamp } from './stamps.ts';
import { GATEWAY_VERSION } from './version.ts';

const REQUEST_TIMEOUT_MS = 60_000;
/** How long a control request's answer is kept for a repeat of the same request id. */
const RETRY_MIN_MS = 250;
const RETRY_MAX_MS = 30_000;

const checkHeartbeatResponse = relayCheck('HeartbeatResponse');
const checkLeaseResponse = relayCheck('LeaseResponse');
const checkChangesResponse = relayCheck('ChangesResponse');
const checkOutgoingMessage = relayCheck('OutgoingMessage');
const checkStagedUpload = relayCheck('StagedUpload');
const checkStagedPart = relayCheck('StagedPart');

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
  #control: ControlSocket | null = null;

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
   * Keeps the control WebSocket open until `signal` aborts, reconnecting with backoff and jitter
   * (gateway/control-socket.ts). Every request is handed to `handle`; its result (or GatewayError) is the answer.
   */
  runControlSocket(
    handle: (request: GatewayRequest) => Promise<unknown>,
    signal: AbortSignal,
    retry?: { minMs: number; maxMs: number },
  ): Promise<void> {
    this.#control ??= new ControlSocket({
      base: this.#base,
      secret: this.#secret,
      gatewayId: this.gatewayId,
      instance: this.instance,
      log: this.#log,
    });
    return this.#control.run(handle, signal, retry);
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
