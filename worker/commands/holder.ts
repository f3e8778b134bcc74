/**
 * Commands for an account's mailbox go to the gateway holding its lease. When nobody holds it (or
 * the holder's control socket is down) we wait a little for a gateway to take over, then give up
 * with 502: nothing has been done at that point.
 */
import type { GatewayRequest } from '../../common/relay.ts';
import type { Lease } from '../durable/lease.ts';
import type { Env } from '../env.ts';
import { callGateway } from '../gateways/registry.ts';
import { ApiError, NothingSent, OutcomeUnknown, isErrorKind, type ErrorKind } from '../lib/errors.ts';
import { gatewayObject } from '../durable/gateway-stub.ts';

/** Time budgets: mailbox actions answer within ~20 s; a send (up to 30 MB over SMTP) may take longer. */
export const COMMAND_BUDGET = {
  action: { waitMs: 8_000, timeoutMs: 12_000 },
  send: { waitMs: 8_000, timeoutMs: 90_000 },
} as const;

/**
 * A send's wait for the gateway's answer: SEND_TIMEOUT_SECONDS (1–600), else the default. Past it
 * the outcome is unknown and is settled later, never by sending again (send/idempotency.ts).
 */
export function sendBudget(env: Env): { waitMs: number; timeoutMs: number } {
  const seconds = Number(env.SEND_TIMEOUT_SECONDS);
  const valid = Number.isInteger(seconds) && seconds >= 1 && seconds <= 600;
  return { waitMs: COMMAND_BUDGET.send.waitMs, timeoutMs: valid ? seconds * 1000 : COMMAND_BUDGET.send.timeoutMs };
}

const POLL_MS = 250;

/**
 * An answer across Durable Object RPC: errors are returned, not thrown (thrown ones are logged as
 * uncaught). `nothing_sent`: a send that certainly handed nothing over (see NothingSent).
 */
export type CommandAnswer<T> =
  | { ok: true; value: T }
  | { ok: false; kind: ErrorKind; detail: string; outcome_unknown?: boolean; nothing_sent?: boolean };

export async function answerOf<T>(work: () => Promise<T>): Promise<CommandAnswer<T>> {
  try {
    return { ok: true, value: await work() };
  } catch (err) {
    if (err instanceof OutcomeUnknown) return { ok: false, kind: err.kind, detail: err.detail, outcome_unknown: true };
    if (err instanceof NothingSent) return { ok: false, kind: err.kind, detail: err.detail, nothing_sent: true };
    if (err instanceof ApiError) return { ok: false, kind: err.kind, detail: err.detail };
    console.error('account command failed:', err instanceof Error ? err.stack : String(err));
    return {
      ok: false,
      kind: 'unexpected_error',
      detail: 'Something went wrong on our side; the error has been logged.',
    };
  }
}

/** The value of an answer, or its error thrown as the ApiError it was. */
export function unwrap<T>(answer: CommandAnswer<T>): T {
  if (answer.ok) return answer.value;
  if (answer.outcome_unknown) throw new OutcomeUnknown(answer.detail);
  throw new ApiError(isErrorKind(answer.kind) ? answer.kind : 'unexpected_error', answer.detail);
}

/**
 * Send `request` to the lease holder, waiting up to `waitMs` for one to be connected; the gateway has
 * `timeoutMs` to answer, or until `deadline` (ms) when the budget started earlier (a queued send).
 */
export async function callHolder(
  env: Env,
  lease: () => Lease | null,
  request: GatewayRequest,
  budget: { waitMs: number; timeoutMs: number; deadline?: number },
): Promise<unknown> {
  const deadline = Date.now() + budget.waitMs;
  for (;;) {
    // The holder as the account's object knows it; whether it is alive is its control socket's say
    // (the lease's expiry is renewed in D1 only, see durable/lease.ts).
    const current = lease();
    if (current) {
      const stub = gatewayObject(env, current.gateway_id);
      if (await stub.isConnected()) {
        // The gateway has `timeoutMs` to answer, and never past the deadline of a budget that began earlier.
        const timeoutMs =
          budget.deadline === undefined
            ? budget.timeoutMs
            : Math.max(1, Math.min(budget.timeoutMs, budget.deadline - Date.now()));
        return callGateway(env, current.gateway_id, request, timeoutMs);
      }
    }
    if (Date.now() >= deadline) {
      throw new ApiError(
        'provider_error',
        current
          ? `The gateway holding this account (${current.gateway_id}) is not connected.`
          : 'No mail gateway holds this account right now.',
      );
    }
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}
