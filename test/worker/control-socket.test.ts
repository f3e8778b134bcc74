/**
 * The GatewayObject's sockets: requests belong to the socket they were sent on, a new socket of the
 * same gateway does not fail them, and the heartbeat is answered without the object's code.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it, vi } from 'vitest';
import { PING, PONG } from '../../common/heartbeat.ts';
import { gatewayObject } from '../../worker/durable/gateway-stub.ts';
import { openSocket } from './gateway-socket.ts';

describe('the control socket', () => {
  it('answers pings with pongs', async () => {
    const socket = await openSocket('gw-ping');
    socket.ws.send(PING);
    await vi.waitFor(() => expect(socket.received).toEqual([PONG]));
    socket.ws.close(1000, 'done');
  });

  it('keeps a request on the socket it was sent on when a new socket opens, then closes the old one', async () => {
    const gatewayId = 'gw-owned';
    const first = await openSocket(gatewayId);
    const stub = gatewayObject(env, gatewayId);
    const pending = stub.request({ op: 'release', account_id: 'acc_00000000000000000000000000' }, 10_000);
    await vi.waitFor(() => expect(first.requests()).toHaveLength(1));
    const [sent] = first.requests();

    const second = await openSocket(gatewayId);
    // New requests go to the new socket; the old one is still open, waiting for its answer.
    const later = stub.request({ op: 'claim', account_id: 'acc_00000000000000000000000000' }, 10_000);
    await vi.waitFor(() => expect(second.requests()).toHaveLength(1));
    expect(first.requests()).toHaveLength(1);
    expect(first.state.closed).toBe(false);

    first.ws.send(JSON.stringify({ type: 'response', id: sent.id, ok: true, result: 'from the first socket' }));
    expect(await pending).toEqual({ ok: true, result: 'from the first socket' });
    await vi.waitFor(() => expect(first.state.closed).toBe(true));

    const [next] = second.requests();
    second.ws.send(JSON.stringify({ type: 'response', id: next.id, ok: true, result: null }));
    expect(await later).toEqual({ ok: true, result: null });
    second.ws.close(1000, 'done');
  });

  it('sends a request pending on a socket that closed again on the next socket', async () => {
    const gatewayId = 'gw-moved';
    const first = await openSocket(gatewayId);
    const stub = gatewayObject(env, gatewayId);
    const pending = stub.request({ op: 'claim', account_id: 'acc_00000000000000000000000000' }, 10_000);
    await vi.waitFor(() => expect(first.requests()).toHaveLength(1));
    first.ws.close(4000, 'dropped'); // not a clean stop: the gateway comes back
    const second = await openSocket(gatewayId);
    await vi.waitFor(() => expect(second.requests()).toHaveLength(1));
    // The same request (same id): the gateway answers it once however often it arrives.
    expect(second.requests()[0].id).toBe(first.requests()[0].id);
    second.ws.send(JSON.stringify({ type: 'response', id: second.requests()[0].id, ok: true, result: 'moved' }));
    expect(await pending).toEqual({ ok: true, result: 'moved' });
    second.ws.close(1000, 'done');
  });

  it('never gives a send or a copy to another process of the same id; repeatable requests go to it', async () => {
    const gatewayId = 'gw-restarted';
    const account = 'acc_00000000000000000000000000';
    const at = { path: 'INBOX', uidvalidity: 1, uid: 7 };
    const first = await openSocket(gatewayId, 'process-a');
    const stub = gatewayObject(env, gatewayId);
    const send = stub.request(
      { op: 'send', account_id: account, mode: 'send', key: 'k'.repeat(20), append_to: null },
      10_000,
    );
    const copy = stub.request(
      { op: 'modify', account_id: account, steps: [{ type: 'copy', ...at, destination: 'Archive' }] },
      10_000,
    );
    const flags = stub.request(
      { op: 'modify', account_id: account, steps: [{ type: 'flags', ...at, add: ['\\Seen'], remove: [] }] },
      10_000,
    );
    const claim = stub.request({ op: 'claim', account_id: account }, 10_000);
    await vi.waitFor(() => expect(first.requests()).toHaveLength(4));
    first.ws.close(4000, 'killed'); // the process died: its memory of these requests went with it

    const second = await openSocket(gatewayId, 'process-b');
    expect(await send).toMatchObject({ ok: false, kind: 'unanswered' });
    expect(await copy).toMatchObject({ ok: false, kind: 'unanswered' });
    await vi.waitFor(() => expect(second.requests()).toHaveLength(2));
    expect(second.requests().map((r) => r.request.op)).toEqual(['modify', 'claim']);
    for (const r of second.requests())
      second.ws.send(JSON.stringify({ type: 'response', id: r.id, ok: true, result: null }));
    expect(await flags).toEqual({ ok: true, result: null });
    expect(await claim).toEqual({ ok: true, result: null });
    second.ws.close(1000, 'done');
  });

  it('answers a send the gateway says may have gone out as unanswered, and a refusal as the refusal', async () => {
    const socket = await openSocket('gw-maybe');
    const stub = gatewayObject(env, 'gw-maybe');
    const request = (key: string) =>
      stub.request(
        { op: 'send', account_id: 'acc_00000000000000000000000000', mode: 'send', key, append_to: null },
        10_000,
      );
    const lost = request('a'.repeat(20));
    const refused = request('b'.repeat(20));
    await vi.waitFor(() => expect(socket.requests()).toHaveLength(2));
    const [first, second] = socket.requests();
    const error = { kind: 'provider_error', detail: 'SMTP 127.0.0.1:25: timed out' };
    socket.ws.send(
      JSON.stringify({ type: 'response', id: first.id, ok: false, error: { ...error, may_have_sent: true } }),
    );
    socket.ws.send(JSON.stringify({ type: 'response', id: second.id, ok: false, error }));
    expect(await lost).toMatchObject({ ok: false, kind: 'unanswered', detail: /may have taken it: .*timed out/ });
    expect(await refused).toEqual({ ok: false, ...error });
    socket.ws.close(1000, 'done');
  });
});
