/** Exponential backoff with full jitter: a random delay in [delay/2, delay], delay = min * 2^attempt capped at max. */
export function backoffDelay(attempt: number, minMs: number, maxMs: number): number {
  const delay = Math.min(maxMs, minMs * 2 ** Math.min(attempt, 30));
  return Math.round(delay / 2 + Math.random() * (delay / 2));
}

/** Resolves after `ms`, or early (without throwing) when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

export interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(err: unknown): void;
}

export function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/**
 * Runs `fn` once at a time and coalesces requests: a request made while a run is in progress
 * schedules exactly one more run right after it (never a debounce: the next run starts at once).
 * The promise of a request settles with the first run that started after it.
 */
export class Coalescer {
  #fn: () => Promise<void>;
  #running = false;
  #next: Deferred<void> | null = null;

  constructor(fn: () => Promise<void>) {
    this.#fn = fn;
  }

  run(): Promise<void> {
    this.#next ??= deferred<void>();
    const { promise } = this.#next;
    if (!this.#running) void this.#drain();
    return promise;
  }

  async #drain(): Promise<void> {
    this.#running = true;
    while (this.#next) {
      const waiter = this.#next;
      this.#next = null;
      try {
        await this.#fn();
        waiter.resolve();
      } catch (err) {
        waiter.reject(err);
      }
    }
    this.#running = false;
  }
}

/** Runs tasks one at a time, in the order they were asked for (a FIFO lock); a failed task does not stop the next. */
export class Turns {
  #tail: Promise<unknown> = Promise.resolve();

  run<T>(task: () => Promise<T>): Promise<T> {
    const result = this.#tail.then(task, task);
    this.#tail = result.catch(() => undefined);
    return result;
  }
}
