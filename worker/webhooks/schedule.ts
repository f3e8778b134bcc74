/** The delivery settings (timeout, clock, jitter, outbound fetch) and the retry schedule of webhook calls. */

export interface DeliveryOptions {
  /** Outbound HTTP; tests route it to an in-test subscriber. */
  fetch: (url: string, init: RequestInit) => Promise<Response>;
  timeoutMs: number;
  now: () => number;
  /** In [0, 1): the jitter of retry delays. */
  random: () => number;
}

export const DELIVERY_TIMEOUT_MS = 15_000;

/**
 * Calls in flight at once per consumer invocation. A Worker invocation opens at most 6 outbound
 * connections at a time and queues the rest; a queued call's timeout would run while it waits.
 */
export const MAX_CALLS_IN_FLIGHT = 6;

export function deliveryOptions(overrides: Partial<DeliveryOptions> = {}): DeliveryOptions {
  return {
    fetch: (url, init) => fetch(url, init),
    timeoutMs: DELIVERY_TIMEOUT_MS,
    now: () => Date.now(),
    random: Math.random,
    ...overrides,
  };
}

export const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

/** Waits before the 2nd, 3rd, … 10th attempt (DECISIONS.md, "Webhook calls"). */
const RETRY_DELAYS_MS = [
  5 * SECOND,
  5 * MINUTE,
  30 * MINUTE,
  2 * HOUR,
  5 * HOUR,
  10 * HOUR,
  14 * HOUR,
  20 * HOUR,
  24 * HOUR,
];
const JITTER = 0.1;

/** The wait after `attempts` failed attempts (±10 %), or null when the schedule is over. */
export function retryDelayMs(attempts: number, random: () => number): number | null {
  const base = RETRY_DELAYS_MS[attempts - 1];
  return base === undefined ? null : Math.round(base * (1 - JITTER + 2 * JITTER * random()));
}

/**
 * Queues hold a delayed message for at most 12 h. Longer waits stay in D1 only, and the sweep
 * enqueues them when they are due.
 */
export const MAX_QUEUE_DELAY_SECONDS = 12 * 60 * 60;

/** Calls claimed ahead of the free slots, at most: four rounds of calls. */
export const CLAIM_AHEAD = 4 * MAX_CALLS_IN_FLIGHT;

/**
 * How long a claim keeps others off a call: its wait for a slot (at most CLAIM_AHEAD calls ahead of
 * it, four rounds), the call itself, and room for the database writes.
 */
export const leaseMs = (options: DeliveryOptions) =>
  (CLAIM_AHEAD / MAX_CALLS_IN_FLIGHT + 1) * options.timeoutMs + MINUTE;
