// An endpoint changed while calls wait or are under way: no call that starts after the change has
// answered goes to the old audience. The subscriber itself makes the change in the middle of a
// batch of 50 retries (6 in flight, more claimed ahead), so calls claimed before the change are
// still on their way when it answers.
import { env } from 'cloudflare:workers';
import { beforeEach, describe, expect, it } from 'vitest';
import { deliveryOptions, SECOND } from '../../worker/webhooks/schedule.ts';
import { api } from './helpers.ts';
import {
  type Answer,
  consume,
  conversations,
  createEndpoint,
  emailData,
  eventMessage,
  HOOK_URL,
  insertAccount,
  recordingEnv,
  writeEvent,
} from './webhook-helpers.ts';

const CALLS = 50;
const OTHER_URL = 'https://elsewhere.example.com/hook';

beforeEach(async () => {
  await env.DB.batch(
    ['webhook_conversations', 'webhook_endpoints', 'events', 'accounts'].map((table) =>
      env.DB.prepare(`DELETE FROM ${table}`),
    ),
  );
});

interface Seen {
  url: string;
  /** The change had answered when this call started. */
  afterChange: boolean;
}

/** A subscriber answering `answer`; at its `changeAt`-th call it makes the change and waits for its answer. */
function changingSubscriber(answer: Answer, changeAt: number, change: () => Promise<void>) {
  const seen: Seen[] = [];
  let changed = false;
  const fetch = async (url: string) => {
    seen.push({ url, afterChange: changed });
    if (seen.length === changeAt) {
      await change();
      changed = true;
    }
    return new Response('', { status: answer as number });
  };
  return { seen, fetch };
}

const cases: [string, (endpointId: string, kept: string) => Record<string, unknown> | 'DELETE', boolean][] = [
  ['a pause', () => ({ enabled: false }), false],
  ['a deletion', () => 'DELETE', false],
  ['a new URL', () => ({ url: OTHER_URL }), true],
  ['narrowing account_ids', (_id, kept) => ({ account_ids: [kept] }), false],
];

describe('an endpoint changed while 50 of its calls wait or retry', () => {
  for (const [what, change, stillWanted] of cases) {
    it(`${what}: no call started after the change answered goes to the old audience`, async () => {
      let clock = Date.now();
      const [account, kept] = [await insertAccount(), await insertAccount()];
      const endpoint = await createEndpoint({ account_ids: [account, kept] });
      const events = [];
      for (let i = 0; i < CALLS; i++) events.push(await writeEvent('email.new', account, emailData()));

      // First pass: every call fails, so all 50 wait for a retry.
      const { env: testEnv, sent } = recordingEnv();
      const failing = changingSubscriber(500, 0, async () => undefined);
      const opts = (fetch: typeof failing.fetch) =>
        deliveryOptions({ fetch, now: () => clock, random: () => 0.5, timeoutMs: 5 * SECOND });
      await consume(testEnv, opts(failing.fetch), events.map(eventMessage));
      expect(failing.seen).toHaveLength(CALLS);
      expect((await conversations(endpoint.id)).every((c) => c.status === 'retrying')).toBe(true);

      // The retries: the 10th call changes the endpoint.
      clock += 60 * SECOND;
      const body = change(endpoint.id, kept);
      const retrying = changingSubscriber(200, 10, async () => {
        const res =
          body === 'DELETE'
            ? await api('DELETE', `/webhooks/endpoints/${endpoint.id}`)
            : await api('PATCH', `/webhooks/endpoints/${endpoint.id}`, { body });
        expect(res.status).toBe(200);
      });
      await consume(
        testEnv,
        opts(retrying.fetch),
        sent.map((s) => s.body),
      );
      const late = retrying.seen.filter((c) => c.afterChange);
      expect(retrying.seen.length).toBeGreaterThanOrEqual(10);
      expect(late.filter((c) => c.url === HOOK_URL)).toEqual([]);
      const rows = await conversations(endpoint.id);
      if (stillWanted) {
        // The new URL gets the rest, and only it.
        expect(late.length).toBeGreaterThan(0);
        expect(rows.every((c) => c.status === 'delivered')).toBe(true);
      } else {
        expect(late).toEqual([]);
        const dropped = rows.filter((c) => c.status === 'dropped');
        // Calls made before the change answered are delivered; every other one is dropped, with why.
        expect(dropped.length).toBe(CALLS - retrying.seen.length);
        if (body !== 'DELETE') expect(dropped.every((c) => /no longer takes this event/.test(c.last_error))).toBe(true);
        expect(rows.filter((c) => c.status === 'retrying' || c.status === 'pending')).toEqual([]);
      }
    });
  }
});
