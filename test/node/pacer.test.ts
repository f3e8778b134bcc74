// The gateway's pacer (gateway/pacer.ts): background work starts one at a time, spaced over the
// interval by the accounts that joined; new mail on its way holds it (and a heartbeat's `quiet`)
// until the mail is through, or for the longest hold at most.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { deferred } from '../../gateway/async.ts';
import { Pacer } from '../../gateway/pacer.ts';

/** Which of `turns` have resolved once (fake) time moved on by `ms`. */
async function settledAfter(turns: Promise<void>[], ms: number): Promise<boolean[]> {
  const done = turns.map(() => false);
  turns.forEach((t, i) => void t.then(() => (done[i] = true)));
  await vi.advanceTimersByTimeAsync(ms);
  return done;
}

describe('Pacer', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('lets the turns of joined accounts go one at a time, in the order asked, never all at once', async () => {
    // 4 accounts every 400 ms: one start per 100 ms.
    const pacer = new Pacer(400);
    for (let i = 0; i < 4; i++) pacer.join();
    const order: number[] = [];
    const turns = Array.from({ length: 4 }, (_, i) => pacer.turn().then(() => void order.push(i)));
    // The first goes at once; the others wait for their slots.
    expect(await settledAfter(turns, 0)).toEqual([true, false, false, false]);
    expect(await settledAfter(turns, 100)).toEqual([true, true, false, false]);
    expect(await settledAfter(turns, 200)).toEqual([true, true, true, true]);
    expect(order).toEqual([0, 1, 2, 3]);
  });

  it('holds background work while new mail is on its way, and lets it go when the mail is through', async () => {
    const pacer = new Pacer(10, 60_000);
    pacer.join();
    const mail = deferred<void>();
    void pacer.urgent(mail.promise);
    const turn = pacer.turn();
    const quiet = pacer.quiet(60_000);
    expect(await settledAfter([turn, quiet], 1_000)).toEqual([false, false]);
    mail.resolve();
    expect(await settledAfter([turn, quiet], 0)).toEqual([true, true]);
  });

  it('holds background work for the longest hold at most when new mail stays on its way', async () => {
    const pacer = new Pacer(10, 30);
    pacer.join();
    void pacer.urgent(new Promise<void>(() => {}));
    // Neither waits for mail that never gets through.
    const waiting = [pacer.turn(), pacer.quiet()];
    expect(await settledAfter(waiting, 20)).toEqual([false, false]);
    expect(await settledAfter(waiting, 10)).toEqual([true, true]);
  });

  it('spaces the turns by the accounts that are still in', async () => {
    // Two accounts every 200 ms: 100 ms apart; once one has left, the other's turn comes an interval apart.
    const pacer = new Pacer(200);
    const leave = pacer.join();
    pacer.join();
    await pacer.turn();
    const second = pacer.turn();
    expect(await settledAfter([second], 99)).toEqual([false]);
    expect(await settledAfter([second], 1)).toEqual([true]);
    leave();
    leave(); // leaving twice counts once
    const third = pacer.turn();
    // One interval (200 ms) after the second now, not 100 ms.
    expect(await settledAfter([third], 199)).toEqual([false]);
    expect(await settledAfter([third], 1)).toEqual([true]);
  });
});
