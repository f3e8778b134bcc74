/**
 * One Durable Object per gateway process (named by its GATEWAY_ID): it holds that gateway's
 * control WebSocket, so any part of the Worker can send the gateway a request and await its answer.
 * The socket is accepted with the hibernation API; an object with a request in flight stays awake.
 */
import { DurableObject } from 'cloudflare:workers';
import { GatewayToWorker, type GatewayErrorKind, type GatewayRequest } from '../../common/relay.ts';
import type { Env } from '../env.ts';
import { isoNow } from '../lib/time.ts';

/**
 * What a request answered: its result, the gateway's error (kind + detail), or `unavailable` when
 * no gateway answered. Returned, never thrown: errors thrown across RPC are logged as uncaught.
 */
export type GatewayAnswer =
  | { ok: true; result: unknown }
  | { ok: false; kind: GatewayErrorKind; detail: string }
  | { ok: false; kind: 'unavailable'; detail: string };

interface Pending {
  resolve: (answer: GatewayAnswer) => void;
  timer: ReturnType<typeof setTimeout>;
}

export class GatewayObject extends DurableObject<Env> {
  private readonly pending = new Map<string, Pending>();

  /** The gateway's WebSocket upgrade, already authenticated by the Worker. */
  override async fetch(request: Request): Promise<Response> {
    const gatewayId = new URL(request.url).searchParams.get('gateway_id');
    if (request.headers.get('Upgrade') !== 'websocket' || !gatewayId)
      return new Response('expected a WebSocket upgrade', { status: 426 });
    // One socket per gateway: a reconnecting process replaces its old socket.
    for (const old of this.ctx.getWebSockets()) old.close(1012, 'replaced by a new connection');
    const { 0: client, 1: server } = new WebSocketPair();
    this.ctx.acceptWebSocket(server);
    server.serializeAttachment({ gateway_id: gatewayId });
    await this.env.DB.prepare(
      `INSERT INTO gateways (id, connected, connected_at, last_seen_ms) VALUES (?, 1, ?, ?)
       ON CONFLICT (id) DO UPDATE SET connected = 1, connected_at = excluded.connected_at, last_seen_ms = excluded.last_seen_ms`,
    )
      .bind(gatewayId, isoNow(), Date.now())
      .run();
    return new Response(null, { status: 101, webSocket: client });
  }

  override async webSocketMessage(_ws: WebSocket, message: string | ArrayBuffer): Promise<void> {
    let parsed: GatewayToWorker;
    try {
      parsed = GatewayToWorker.parse(
        JSON.parse(typeof message === 'string' ? message : new TextDecoder().decode(message)),
      );
    } catch {
      return; // not a response we understand; the gateway logs its own errors
    }
    const waiting = this.pending.get(parsed.id);
    if (!waiting) return;
    this.pending.delete(parsed.id);
    clearTimeout(waiting.timer);
    waiting.resolve(
      parsed.ok
        ? { ok: true, result: parsed.result }
        : { ok: false, kind: parsed.error.kind, detail: parsed.error.detail },
    );
  }

  override async webSocketClose(ws: WebSocket): Promise<void> {
    await this.disconnected(ws);
  }

  override async webSocketError(ws: WebSocket): Promise<void> {
    await this.disconnected(ws);
  }

  private async disconnected(ws: WebSocket): Promise<void> {
    const { gateway_id } = (ws.deserializeAttachment() ?? {}) as { gateway_id?: string };
    const open = this.ctx.getWebSockets().filter((s) => s !== ws && s.readyState === WebSocket.OPEN);
    if (gateway_id && open.length === 0) {
      await this.env.DB.prepare('UPDATE gateways SET connected = 0 WHERE id = ?').bind(gateway_id).run();
    }
    for (const [id, waiting] of this.pending) {
      clearTimeout(waiting.timer);
      waiting.resolve({ ok: false, kind: 'unavailable', detail: 'the gateway disconnected before answering' });
      this.pending.delete(id);
    }
  }

  /** Send a request to the gateway and wait for its answer (bounded by `timeoutMs`). */
  async request(request: GatewayRequest, timeoutMs: number): Promise<GatewayAnswer> {
    const socket = this.ctx.getWebSockets().find((s) => s.readyState === WebSocket.OPEN);
    if (!socket) return { ok: false, kind: 'unavailable', detail: 'the gateway is not connected' };
    const id = crypto.randomUUID();
    const answer = new Promise<GatewayAnswer>((resolve) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        resolve({ ok: false, kind: 'unavailable', detail: `no answer within ${Math.round(timeoutMs / 1000)} s` });
      }, timeoutMs);
      this.pending.set(id, { resolve, timer });
    });
    socket.send(JSON.stringify({ type: 'request', id, request }));
    return answer;
  }

  isConnected(): boolean {
    return this.ctx.getWebSockets().some((s) => s.readyState === WebSocket.OPEN);
  }
}
