/**
 * The run's own look at the system (GET /emails, the D1 file, the server's listing) retries what a
 * loaded machine does to a look: a refused or reset connection, a 5xx, a busy database file. A look
 * that still fails after a few minutes throws HarnessGaveUp: the run stopped because it could not
 * look, which says nothing about the product (a product problem is a difference the check found).
 */

/** The harness could not make one of its own calls: not a product problem. */
export class HarnessGaveUp extends Error {
  override name = 'HarnessGaveUp';
}

export interface Retrier {
  /** Calls `call` until it succeeds, retrying transient failures with backoff; other errors pass through. */
  <T>(what: string, call: () => Promise<T> | T): Promise<T>;
  /** How many retries the run needed so far. */
  readonly retries: number;
}

const networkCodes = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'EPIPE',
  'ETIMEDOUT',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_CLOSED',
  // imapflow's dropped or timed-out connection (the server's listing at a check).
  'NoConnection',
  'ETIMEOUT',
]);

/** A failure a loaded machine causes and a later attempt may not meet. */
export function isTransient(err: unknown): boolean {
  const e = err as { message?: string; code?: string; cause?: { code?: string }; status?: number };
  if (networkCodes.has(e?.code ?? '') || networkCodes.has(e?.cause?.code ?? '')) return true;
  const message = String(e?.message ?? err);
  if (message === 'fetch failed') return true;
  // A 5xx from the Worker (or from wrangler dev in front of it), as the helpers report statuses.
  if ((e?.status ?? 0) >= 500 || /\banswered 5\d\d\b|\bstatus 5\d\d\b/.test(message)) return true;
  return /SQLITE_BUSY|database is locked/i.test(message);
}

export function retrier(options: { giveUpAfterMs?: number; log?: (line: string) => void } = {}): Retrier {
  const giveUpAfterMs = options.giveUpAfterMs ?? 180_000;
  let retries = 0;
  const retry = async <T>(what: string, call: () => Promise<T> | T): Promise<T> => {
    const started = Date.now();
    for (let attempt = 1, waitMs = 500; ; attempt++, waitMs = Math.min(waitMs * 2, 15_000)) {
      try {
        return await call();
      } catch (err) {
        if (!isTransient(err)) throw err;
        const elapsed = Date.now() - started;
        const reason = (err as Error).message ?? String(err);
        if (elapsed + waitMs > giveUpAfterMs)
          throw new HarnessGaveUp(
            `the harness gave up on ${what} after ${attempt} attempts in ${Math.round(elapsed / 1000)} s (last: ${reason}); this is no finding about the product`,
          );
        retries++;
        options.log?.(`harness: ${what} failed (${reason}), attempt ${attempt + 1} in ${waitMs} ms`);
        await new Promise((r) => setTimeout(r, waitMs));
      }
    }
  };
  return Object.defineProperty(retry, 'retries', { get: () => retries }) as Retrier;
}
