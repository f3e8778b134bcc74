/** Finding a connected gateway and talking to it. */
import type { GatewayRequest } from '../../common/relay.ts';
import type { GatewayAnswer } from '../durable/gateway-object.ts';
import type { Env } from '../env.ts';
import { ApiError, OutcomeUnknown } from '../lib/errors.ts';
import { gatewayObject } from '../durable/gateway-stub.ts';
import { privateHostError } from '../accounts/mail-hosts.ts';
import { liveSince } from '../durable/lease.ts';

/** How long a gateway may take to answer a request (a login that times out takes ~15 s). */
export const GATEWAY_REQUEST_TIMEOUT_MS = 30_000;

/** Send a request to one gateway; its error answers become the matching API errors. */
export async function callGateway(
  env: Env,
  gatewayId: string,
  request: GatewayRequest,
  timeoutMs = GATEWAY_REQUEST_TIMEOUT_MS,
): Promise<unknown> {
  // Narrowed by hand: the RPC stub's return type does not discriminate the union.
  const answer = (await gatewayObject(env, gatewayId).request(request, timeoutMs)) as GatewayAnswer;
  if (answer.ok) return answer.result;
  if (answer.kind === 'unavailable')
    throw new ApiError('provider_error', `The mail gateway could not be reached: ${answer.detail}.`);
  if (answer.kind === 'unanswered')
    throw new OutcomeUnknown(`The outcome at the mail gateway is unknown: ${answer.detail}.`);
  if (answer.kind === 'private_host') throw privateHostError(answer.detail);
  throw new ApiError(answer.kind, answer.detail);
}

/**
 * Live, connected gateways, least loaded first (accounts held for their capacity; ties in random
 * order), so that verifies, and the claims that follow them, spread over the fleet.
 */
export async function connectedGateways(env: Env): Promise<string[]> {
  const { results } = await env.DB.prepare(
    `SELECT id FROM gateways WHERE connected = 1 AND last_seen_ms > ?
     ORDER BY min(1.0, CAST(held AS REAL) / max(capacity, 1)), random() LIMIT 20`,
  )
    .bind(liveSince(env))
    .all<{ id: string }>();
  return results.map((r) => r.id);
}

/** Send a request to the least loaded connected gateway; 502 when none is. Returns the answer and who gave it. */
export async function callAnyGateway(
  env: Env,
  request: GatewayRequest,
): Promise<{ gatewayId: string; result: unknown }> {
  for (const gatewayId of await connectedGateways(env)) {
    if (!(await gatewayObject(env, gatewayId).isConnected())) continue;
    return { gatewayId, result: await callGateway(env, gatewayId, request) };
  }
  throw new ApiError(
    'provider_error',
    'No mail gateway is connected, so the mailbox cannot be reached. Start the gateway (npm run gateway).',
  );
}

/** Tell a gateway something without waiting for it to act (claim or release an account). Never throws. */
export async function notifyGateway(env: Env, gatewayId: string | null, request: GatewayRequest): Promise<void> {
  const targets = gatewayId ? [gatewayId] : await connectedGateways(env);
  for (const target of targets) {
    // A gateway that is gone lets its leases lapse, and another one picks the account up.
    const answer = (await gatewayObject(env, target).request(request, 5_000)) as GatewayAnswer;
    if (answer.ok || answer.kind !== 'unavailable') return;
  }
}
