/**
 * One Durable Object per gateway (named by its gateway id): it holds that gateway's control
 * WebSocket, so any part of the Worker can send the gateway a request and await its answer. Only the
 * process that owns the id gets here (gateways/fleet.ts); `liveInstance` tells whether it still has
 * a live socket, which a second process with the same id needs to know before taking the id over.
 * The socket is accepted with the hibernation API; an object with a request in flight stays awake.
 *
 * Liveness (common/heartbeat.ts): the gateway pings, the runtime answers for us and notes when; a
 * socket silent for DEAD_AFTER_MS is dead. Requests belong to the socket they were sent on: a new
 * socket of the same gateway takes the new requests, while the old one keeps its pending ones until
 * they are answered, and is closed then. A request sent once is bound to the process (`instance`)
 * that received it: only that process remembers it, and answers a request id it has seen from
 * memory instead of running it twice. When its socket dies, it is sent again on a newer socket of
 * the same process, or waits for one until its own deadline. When the gateway id is held by another
 * process meanwhile (a restart with the same GATEWAY_ID), a request that may have changed something
 * not safely repeated (a send, a COPY or MOVE) gets `unanswered` (its outcome is unknown); only the
 * others (verify, claim, release, flags, deletions) are sent to the new process.
 */
import { DurableObject } from 'cloudflare:workers';
import { DEAD_AFTER_MS, PING, PONG } from '../../common/heartbeat.ts';
import { GatewayToWorker, type GatewayErrorKind, type GatewayRequest } from '../../common/relay.ts';
import type { Env } from '../env.ts';
import { meteredEnv } from '../lib/d1-meter.ts';
import { isoNow } from '../lib/time.ts';

/**
 * What a request answered: its result, the gateway's error (kind + detail), `unavailable` when it
 * never reached a gateway, or `unanswered` when it went out but no answer came in time (the gateway
 * may have carried it out) or the gateway answered that the server may have taken the message. Returned, never thrown: errors thrown across RPC are logged as uncaught.
 */
export type GatewayAnswer =
  | { ok: true; result: unknown }
  | { ok: false; kind: GatewayErrorKind; detail: string }
  | { ok: false; kind: 'unavailable' | 'unanswered'; detail: string };

interface SocketInfo {
  gateway_id: string;
  /** The gateway process (its random instance id). */
  instance: string;
  socket_id: string;
  opened_ms: number;
}

interface Pending {
  request: GatewayRequest;
  /** The socket it was last sent on; null while it waits for a live one. */
  socketId: string | null;
  /** The process it was first sent to; null until then. */
  instance: string | null;
  /** It went out on a socket at least once: without an answer, its outcome is unknown. */
  sent: boolean;
  resolve: (answer: GatewayAnswer) => void;
  timer: ReturnType<typeof setTimeout>;
}

/** After a socket was lost uncleanly, requests wait this long for the gateway's next socket. */
const RECONNECT_GRACE_MS = 20_000;
/** Close codes of a gateway that went away on purpose (stopping): nothing to wait for. */
const CLEAN_CLOSE = new Set([1000, 1001]);

/** Whether a request may be carried out again by another process: it changes nothing twice. */
function repeatable(request: GatewayRequest): boolean {
  if (request.op === 'send') return false;
  if (request.op === 'modify') return request.steps.every((step) => step.type === 'flags' || step.type === 'delete');
  // A folder created, renamed or deleted once is refused the second time: its caller would be told
  // of a failure for a change that happened.
  if (request.op === 'folder') return false;
  return true;
}

const info = (ws: WebSocket) => (ws.deserializeAttachment() ?? {}) as Partial<SocketInfo>;

export class GatewayObject extends DurableObject<Env> {
  private readonly pending = new Map<string, Pending>();
  private watchdog: ReturnType<typeof setInterval> | null = null;
  /** When a socket was last lost without a clean close (in memory: a woken object has none). */
  private lostAt = 0;

  constructor(ctx: DurableObjectState, rawEnv: Env) {
    const env = meteredEnv(rawEnv);
    super(ctx, env);
    ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair(PING, PONG));
  }

  /** The gateway's WebSocket upgrade, already authenticated by the Worker (signed, nonce used once). */
  override async fetch(request: Request): Promise<Response> {
    const gatewayId = new URL(request.url).searchParams.get('gateway_id');
    if (request.headers.get('Upgrade') !== 'websocket' || !gatewayId)
      return new Response('expected a WebSocket upgrade', { status: 426 });
    const { 0: client, 1: server } = new WebSocketPair();
    this.ctx.acceptWebSocket(server);
    const socket: SocketInfo = {
      gateway_id: gatewayId,
      instance: new URL(request.url).searchParams.get('instance') ?? '',
      socket_id: crypto.randomUUID(),
      opened_ms: Date.now(),
    };
    server.serializeAttachment(socket);
    // Older sockets: the dead ones go now (their requests move here); the live ones finish theirs.
    for (const old of this.ctx.getWebSockets()) {
      if (old !== server && (!this.alive(old) || !this.holdsRequests(old)))
        this.retire(old, 'replaced by a new connection');
    }
    this.dispatchWaiting();
    await this.env.DB.prepare(
      `INSERT INTO gateways (id, connected, connected_at, last_seen_ms) VALUES (?, 1, ?, ?)
       ON CONFLICT (id) DO UPDATE SET connected = 1, connected_at = excluded.connected_at, last_seen_ms = excluded.last_seen_ms`,
    )
      .bind(gatewayId, isoNow(), Date.now())
      .run();
    return new Response(null, { status: 101, webSocket: client });
  }

  override async webSocketMessage(ws: WebSocket, message: string | ArrayBuffer): Promise<void> {
    let parsed: GatewayToWorker;
    try {
      parsed = GatewayToWorker.parse(
        JSON.parse(typeof message === 'string' ? message : new TextDecoder().decode(message)),
      );
    } catch {
      return; // not a response we understand; the gateway logs its own errors
    }
    const waiting = this.pending.get(parsed.id);
    if (waiting) {
      this.settle(
        parsed.id,
        parsed.ok
          ? { ok: true, result: parsed.result }
          : parsed.error.may_have_sent
            ? { ok: false, kind: 'unanswered', detail: `the mail server may have taken it: ${parsed.error.detail}` }
            : { ok: false, kind: parsed.error.kind, detail: parsed.error.detail },
      );
    }
    // A superseded socket is closed once its last request is answered.
    const newest = this.newestLive();
    if (newest && ws !== newest && !this.holdsRequests(ws)) this.retire(ws, 'replaced by a new connection');
  }

  override async webSocketClose(ws: WebSocket, code: number): Promise<void> {
    await this.disconnected(ws, CLEAN_CLOSE.has(code));
  }

  override async webSocketError(ws: WebSocket): Promise<void> {
    await this.disconnected(ws, false);
  }

  /** Send a request to the gateway and wait for its answer (bounded by `timeoutMs`). */
  async request(request: GatewayRequest, timeoutMs: number): Promise<GatewayAnswer> {
    if (!this.isConnected()) return { ok: false, kind: 'unavailable', detail: 'the gateway is not connected' };
    const id = crypto.randomUUID();
    const answer = new Promise<GatewayAnswer>((resolve) => {
      const timer = setTimeout(() => {
        const seconds = Math.round(timeoutMs / 1000);
        this.settle(
          id,
          this.pending.get(id)?.sent
            ? { ok: false, kind: 'unanswered', detail: `no answer within ${seconds} s` }
            : { ok: false, kind: 'unavailable', detail: `no gateway connection within ${seconds} s` },
        );
      }, timeoutMs);
      this.pending.set(id, { request, socketId: null, instance: null, sent: false, resolve, timer });
    });
    this.dispatch(id);
    this.watchdog ??= setInterval(() => this.checkSockets(), DEAD_AFTER_MS / 4);
    return answer;
  }

  /**
   * A live socket, or one lost uncleanly a moment ago: gone silent, or dropped, within the time the
   * gateway needs to notice and reconnect. Requests wait for that reconnect instead of failing.
   */
  isConnected(): boolean {
    if (this.newestLive()) return true;
    const now = Date.now();
    const silentSince = Math.max(
      0,
      ...this.ctx
        .getWebSockets()
        .filter((ws) => ws.readyState === WebSocket.OPEN)
        .map((ws) => this.lastSign(ws)),
    );
    return now - silentSince <= DEAD_AFTER_MS + RECONNECT_GRACE_MS || now - this.lostAt <= RECONNECT_GRACE_MS;
  }

  /** The process whose socket is the newest live one, or null when none is live. */
  liveInstance(): string | null {
    const newest = this.newestLive();
    return newest ? (info(newest).instance ?? null) : null;
  }

  /** The last ping of a socket, or its opening. */
  private lastSign(ws: WebSocket): number {
    const lastPing = this.ctx.getWebSocketAutoResponseTimestamp(ws)?.getTime() ?? 0;
    return Math.max(lastPing, info(ws).opened_ms ?? 0);
  }

  /** Alive: open, and pinged (or opened) within DEAD_AFTER_MS. */
  private alive(ws: WebSocket): boolean {
    return ws.readyState === WebSocket.OPEN && Date.now() - this.lastSign(ws) <= DEAD_AFTER_MS;
  }

  /** The newest live socket, of one process when `instance` is given. */
  private newestLive(instance: string | null = null): WebSocket | null {
    let newest: WebSocket | null = null;
    for (const ws of this.ctx.getWebSockets()) {
      if (instance !== null && (info(ws).instance ?? '') !== instance) continue;
      if (this.alive(ws) && (!newest || (info(ws).opened_ms ?? 0) >= (info(newest).opened_ms ?? 0))) newest = ws;
    }
    return newest;
  }

  private holdsRequests(ws: WebSocket): boolean {
    const socketId = info(ws).socket_id;
    return [...this.pending.values()].some((p) => p.socketId === socketId);
  }

  /**
   * Sends a pending request on the newest live socket of the process it is bound to (any process
   * for a new one), or leaves it waiting for one; a request whose process was replaced is settled
   * or moved to the new process (see above).
   */
  private dispatch(id: string): void {
    const pending = this.pending.get(id);
    if (!pending) return;
    let socket = this.newestLive(pending.instance);
    if (!socket && pending.instance !== null && this.newestLive()) {
      if (!repeatable(pending.request)) {
        this.settle(id, {
          ok: false,
          kind: 'unanswered',
          detail: 'the gateway process that had it stopped before answering, and another process took its place',
        });
        return;
      }
      socket = this.newestLive();
    }
    if (!socket) {
      pending.socketId = null;
      return;
    }
    pending.socketId = info(socket).socket_id ?? null;
    pending.instance = info(socket).instance ?? '';
    try {
      socket.send(JSON.stringify({ type: 'request', id, request: pending.request }));
      pending.sent = true;
    } catch {
      pending.socketId = null; // closing under us: the next check or socket sends it
    }
  }

  private dispatchWaiting(): void {
    for (const [id, pending] of this.pending) if (pending.socketId === null) this.dispatch(id);
  }

  /** Closes a socket (if still open) and moves its pending requests to another. */
  private retire(ws: WebSocket, reason: string, code = 1012): void {
    try {
      if (ws.readyState === WebSocket.OPEN) ws.close(code, reason);
    } catch {
      // already closing
    }
    const socketId = info(ws).socket_id;
    for (const pending of this.pending.values()) if (pending.socketId === socketId) pending.socketId = null;
    this.dispatchWaiting();
  }

  /** While requests are pending: dead sockets are closed, waiting requests go out on a live one. */
  private checkSockets(): void {
    for (const ws of this.ctx.getWebSockets()) {
      if (ws.readyState === WebSocket.OPEN && !this.alive(ws)) {
        this.lostAt = Date.now();
        this.retire(ws, 'no heartbeat', 1011);
      }
    }
    this.dispatchWaiting();
  }

  private settle(id: string, answer: GatewayAnswer): void {
    const pending = this.pending.get(id);
    if (!pending) return;
    this.pending.delete(id);
    clearTimeout(pending.timer);
    pending.resolve(answer);
    if (this.pending.size === 0 && this.watchdog) {
      clearInterval(this.watchdog);
      this.watchdog = null;
    }
  }

  private async disconnected(ws: WebSocket, clean: boolean): Promise<void> {
    const { gateway_id } = info(ws);
    if (!clean) this.lostAt = Date.now();
    this.retire(ws, 'closed');
    const open = this.ctx.getWebSockets().filter((s) => s !== ws && s.readyState === WebSocket.OPEN);
    if (gateway_id && open.length === 0) {
      await this.env.DB.prepare('UPDATE gateways SET connected = 0 WHERE id = ?').bind(gateway_id).run();
    }
  }
}
