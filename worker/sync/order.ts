/**
 * The order of a gateway's batches for one account (common/relay.ts `ChangesSequence`). The gateway
 * keeps several batches on their way; batch `n` of a stream is applied only after `n - 1`. The last
 * applied (stream, n) is kept in the account object's storage with the cursors, so a restarted
 * object still knows it. A new stream (n = 0) replaces the old one: what is left of the old stream
 * is refused, and a refused batch makes the gateway start a new stream from the Worker's cursors.
 * A batch of a gateway session that has ended (its gateway started a later one since) is refused.
 */
import type { ChangesSequence } from '../../common/relay.ts';
import type { AccountStore } from '../durable/account-store.ts';

/** How long a batch waits for the one before it before it is refused. */
const WAIT_FOR_TURN_MS = 30_000;

/** `apply`: its turn; `applied`: already applied (answer, do nothing); `refused`: out of order. */
export type Turn = 'apply' | 'applied' | 'refused';

export class ChangeOrder {
  private readonly store: AccountStore;
  private readonly waiting = new Set<() => void>();
  /** Streams this object instance applied batches of (an older stream is never resumed). */
  private readonly seen = new Set<string>();

  constructor(store: AccountStore) {
    this.store = store;
  }

  private last(): ChangesSequence | null {
    const stream = this.store.meta('changes_stream');
    const n = this.store.meta('changes_n');
    return stream === null || n === null ? null : { stream, n: Number(n) };
  }

  /**
   * A batch of a session of this gateway that has ended: a later session of the same gateway has
   * had a batch applied (another gateway's sessions are told apart by the lease).
   */
  private sessionEnded(seq: ChangesSequence, gatewayId: string): boolean {
    if (seq.session === undefined) return false;
    const [holder, session] = (this.store.meta('changes_session') ?? '').split(' ');
    return holder === gatewayId && seq.session < Number(session);
  }

  /** Where this batch stands now (called again inside the object's serialized section, where it decides). */
  turn(seq: ChangesSequence, gatewayId: string): Turn {
    if (this.sessionEnded(seq, gatewayId)) return 'refused';
    const last = this.last();
    if (last && last.stream === seq.stream) {
      if (seq.n <= last.n) return 'applied';
      if (seq.n === last.n + 1) return 'apply';
      return 'refused';
    }
    return seq.n === 0 ? 'apply' : 'refused';
  }

  /** Waits until the batch before this one was applied (or this one's stream was replaced), at most WAIT_FOR_TURN_MS. */
  async waitForTurn(seq: ChangesSequence, gatewayId: string): Promise<void> {
    const deadline = Date.now() + WAIT_FOR_TURN_MS;
    while (
      this.turn(seq, gatewayId) === 'refused' &&
      Date.now() < deadline &&
      !this.replaced(seq) &&
      !this.sessionEnded(seq, gatewayId)
    ) {
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          this.waiting.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, deadline - Date.now());
        this.waiting.add(wake);
      });
    }
  }

  /** A batch of an older stream: the stream now applied is another one, started after it. */
  private replaced(seq: ChangesSequence): boolean {
    const last = this.last();
    return !!last && last.stream !== seq.stream && seq.n > 0 && this.seen.has(seq.stream);
  }

  /** Records the batch as applied (after its changes committed) and wakes the batches waiting. */
  applied(seq: ChangesSequence, gatewayId: string): void {
    this.seen.add(seq.stream);
    if (seq.session !== undefined && !this.sessionEnded(seq, gatewayId))
      this.store.setMeta('changes_session', `${gatewayId} ${seq.session}`);
    this.store.setMeta('changes_stream', seq.stream);
    this.store.setMeta('changes_n', String(seq.n));
    for (const wake of [...this.waiting]) wake();
  }
}
