import { exports } from 'cloudflare:workers';
import { expect } from 'vitest';
import { PONG } from '../../common/heartbeat.ts';
import { GATEWAY_SIGNATURE_HEADER, signRequest } from '../../common/signing.ts';
import { GATEWAY_SECRET } from './sync-helpers.ts';

/** The gateway's side of a control socket: what it received, and whether the Worker closed it. */
export async function openSocket(gatewayId: string, instance = `proc-${gatewayId}`) {
  const path = `/internal/gateway/connect?gateway_id=${gatewayId}&instance=${instance}`;
  const signature = await signRequest(GATEWAY_SECRET, { method: 'GET', path, body: '' });
  const response = await exports.default.fetch(`https://mail.example.com${path}`, {
    headers: { Upgrade: 'websocket', [GATEWAY_SIGNATURE_HEADER]: signature },
  });
  expect(response.status).toBe(101);
  const ws = response.webSocket!;
  ws.accept();
  const received: string[] = [];
  const state = { closed: false };
  ws.addEventListener('message', (e) => received.push(String(e.data)));
  ws.addEventListener('close', () => {
    state.closed = true;
  });
  return { ws, received, state, requests: () => received.filter((m) => m !== PONG).map((m) => JSON.parse(m)) };
}
