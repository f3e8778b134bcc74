/**
 * Keeps new mail ahead of background work on one gateway. All accounts share one event loop, one
 * link to the Worker and usually one mail server, so the gateway-wide pacer decides when background
 * work starts:
 *  - the accounts' polls (gateway/poll.ts) start one at a time, evenly spaced: with N accounts
 *    polled every interval, one every interval/N, never in bursts (a hundred accounts leased at
 *    once would otherwise poll together every interval, for ever);
 *  - while new mail is on its way (an IDLE notification, until the Worker took what it announced),
 *    background work waits: polls do not start, and a heartbeat waits (`quiet`). Not for ever: mail
 *    holds them for `MAX_HOLD_MS` at most, so a gateway whose accounts always have mail on its way
 *    still polls and keeps its leases.
 */

/** The longest background work waits behind new mail. */
export const MAX_HOLD_MS = 1_000;

interface Waiter {
  since: number;
  resolve(): void;
}

export class Pacer {
  #intervalMs: number;
  #maxHoldMs: number;
  /** Accounts whose polls are paced (each polls once per interval). */
  #members = 0;
  #queue: Waiter[] = [];
  /** When the last background start was let go (performance.now()). */
  #lastStart = Number.NEGATIVE_INFINITY;
  #timer: NodeJS.Timeout | undefined;
  /** New mail on its way now, and when the latest of it began (performance.now()). */
  #urgent = 0;
  #urgentSince = Number.NEGATIVE_INFINITY;
  /** `quiet` callers waiting for the urgent work to end. */
  #quietWaiters = new Set<() => void>();

  constructor(intervalMs: number, maxHoldMs = MAX_HOLD_MS) {
    this.#intervalMs = intervalMs;
    this.#maxHoldMs = maxHoldMs;
  }

  /** An account whose polls are paced from now on; call the result when it stops. */
  join(): () => void {
    this.#members++;
    let left = false;
    return () => {
      if (left) return;
      left = true;
      this.#members--;
    };
  }

  /** Resolves when a background task (a poll) may start: its slot has come and no new mail holds it. */
  turn(): Promise<void> {
    return new Promise((resolve) => {
      this.#queue.push({ since: performance.now(), resolve });
      this.#dispatch();
    });
  }

  /** New mail is on its way until `work` settles: background work waits for it (up to MAX_HOLD_MS). */
  urgent<T>(work: Promise<T>): Promise<T> {
    this.#urgent++;
    this.#urgentSince = performance.now();
    const done = () => {
      this.#urgent--;
      if (this.#urgent > 0) return;
      for (const wake of this.#quietWaiters) wake();
      this.#quietWaiters.clear();
      this.#dispatch();
    };
    work.then(done, done);
    return work;
  }

  /** Resolves once no new mail is on its way, or after `maxMs` at the latest. */
  quiet(maxMs = this.#maxHoldMs): Promise<void> {
    if (this.#urgent === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.#quietWaiters.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, maxMs);
      this.#quietWaiters.add(wake);
    });
  }

  /** Lets the next waiter go when its slot has come, or sets a timer for when it comes. */
  #dispatch(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const head = this.#queue[0];
    if (!head) return;
    const now = performance.now();
    const spacing = this.#intervalMs / Math.max(1, this.#members);
    const slotAt = this.#lastStart + spacing;
    // Held by new mail for MAX_HOLD_MS at most: from when that mail came, and from when it asked
    // (a poll overdue already goes at its slot: a backlog drains at the usual pace).
    const heldUntil = this.#urgent > 0 ? Math.min(this.#urgentSince, head.since) + this.#maxHoldMs : now;
    const at = Math.max(slotAt, heldUntil);
    if (at > now) {
      this.#timer = setTimeout(() => this.#dispatch(), at - now);
      this.#timer.unref();
      return;
    }
    this.#queue.shift();
    this.#lastStart = now;
    head.resolve();
    if (this.#queue.length) this.#dispatch();
  }
}
