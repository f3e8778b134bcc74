// Fetching a folder's new mail (gateway/fetch-new.ts) against a scripted IMAP client: a response
// without a source never lowers the cursor below what was relayed, and its UID is asked again; a
// message over the size limit is fetched only up to its head and relayed `too_large`.
import type { ImapFlow } from 'imapflow';
import { describe, expect, it } from 'vitest';
import type { Change, MessageIn } from '../../common/relay.ts';
import { fetchNew, spansOf, type FetchHost } from '../../gateway/fetch-new.ts';
import { createLogger } from '../../gateway/log.ts';

const source = (uid: number) => Buffer.from(`Subject: m${uid}\r\nMessage-ID: <m${uid}@x>\r\n\r\nbody ${uid}\r\n`);

/** A client whose FETCH answers come from `answer(range, query)`, recorded in `asked`. */
function client(answer: (range: string, query: any) => any[]): ImapFlow & { asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    fetch(range: string, query: any) {
      asked.push(`${range}${query.source ? (typeof query.source === 'object' ? ' head' : ' source') : ' sizes'}`);
      const responses = answer(range, query);
      return (async function* () {
        yield* responses;
      })();
    },
  } as unknown as ImapFlow & { asked: string[] };
}

function host(maxMessageBytes = 1_000_000): FetchHost & { batches: Change[][] } {
  const batches: Change[][] = [];
  return {
    batches,
    log: createLogger('error', {}, () => undefined),
    stage: async () => undefined,
    maxMessageBytes,
    gmail: () => false,
    hints: () => [],
    async send(changes) {
      batches.push(changes);
    },
  };
}

const status = { uidvalidity: 7, uidnext: 4, highest_modseq: null, exact: true };
const base = { path: 'INBOX', uidvalidity: 7, last_uid: 0, highest_modseq: null };
const relayed = (h: { batches: Change[][] }) =>
  h.batches.flat().flatMap((c) => (c.type === 'messages' ? c.messages : [])) as MessageIn[];
const cursorOf = (h: { batches: Change[][] }) => h.batches.flat().find((c) => c.type === 'cursor');

describe('fetchNew', () => {
  it('asks again for a UID answered without its source, and never sends a cursor below what it relayed', async () => {
    const h = host();
    let second = false;
    const c = client((range, query) => {
      if (!query.source) return [1, 2, 3].map((uid) => ({ uid, size: 100 }));
      if (range === '1:3')
        return [
          { uid: 1, flags: new Set(), size: 100, source: source(1) },
          // An unsolicited flag update, or a message expunged while it was read.
          { uid: 2, flags: new Set(['\\Seen']) },
          { uid: 3, flags: new Set(), size: 100, source: source(3) },
          // A flag update for a message already relayed: nothing to do.
          { uid: 1, flags: new Set(['\\Seen']) },
        ];
      second = true;
      return range === '2' ? [{ uid: 2, flags: new Set(), size: 100, source: source(2) }] : [];
    });
    const read = await fetchNew(h, c, 'INBOX', status, base);
    expect(second).toBe(true);
    expect(c.asked).toEqual(['1:* sizes', '1:3 source', '2 source']);
    expect(relayed(h).map((m) => m.uid)).toEqual([1, 3, 2]);
    expect(read).toEqual({ lastUid: 3, complete: true, relayed: [1, 2, 3] });
    expect(cursorOf(h)).toMatchObject({ last_uid: 3 });
  });

  it('a UID that never comes with its source leaves the pass incomplete, the cursor where the folder ends', async () => {
    const h = host();
    const c = client((range, query) => {
      if (!query.source) return [1, 2, 3].map((uid) => ({ uid, size: 100 }));
      if (range === '1:3')
        return [
          { uid: 1, flags: new Set(), size: 100, source: source(1) },
          { uid: 2, flags: new Set() },
          { uid: 3, flags: new Set(), size: 100, source: source(3) },
        ];
      return [];
    });
    const read = await fetchNew(h, c, 'INBOX', status, base);
    expect(read).toEqual({ lastUid: 3, complete: false, relayed: [1, 3] });
    expect(cursorOf(h)).toMatchObject({ last_uid: 3 });
  });

  it('fetches a message over the limit only up to its head, in UID order with the others', async () => {
    const h = host(1_000);
    const c = client((range, query) => {
      if (!query.source)
        return [
          { uid: 1, size: 100 },
          { uid: 2, size: 5_000 },
          { uid: 3, size: 100 },
        ];
      if (range === '1:1') return [{ uid: 1, flags: new Set(), size: 100, source: source(1) }];
      if (range === '2:2')
        return [{ uid: 2, flags: new Set(), size: 5_000, source: Buffer.concat([source(2), Buffer.alloc(200, 65)]) }];
      return range === '3:3' ? [{ uid: 3, flags: new Set(), size: 100, source: source(3) }] : [];
    });
    await fetchNew(h, c, 'INBOX', status, base);
    expect(c.asked).toEqual(['1:* sizes', '1:1 source', '2:2 head', '3:3 source']);
    const [one, two, three] = relayed(h);
    expect([one?.uid, two?.uid, three?.uid]).toEqual([1, 2, 3]);
    expect(two).toMatchObject({ too_large: true, size: 5_000 });
    // Only the header block travels.
    expect(Buffer.from(two!.raw, 'base64').toString()).toBe('Subject: m2\r\nMessage-ID: <m2@x>\r\n\r\n');
  });

  it('cuts the UID range around messages over the limit, never up to "*"', () => {
    expect(spansOf(5, 9, [])).toEqual([{ start: 5, end: 9, omitted: false }]);
    expect(spansOf(5, 4, [])).toEqual([]);
    expect(spansOf(5, 9, [5, 6, 9])).toEqual([
      { start: 5, end: 5, omitted: true },
      { start: 6, end: 6, omitted: true },
      { start: 7, end: 8, omitted: false },
      { start: 9, end: 9, omitted: true },
    ]);
  });

  it('fetches nothing whole when the only new message is over the limit (a FETCH "n:*" would name it)', async () => {
    const h = host(1_000);
    const c = client((range, query) => {
      if (!query.source) return [{ uid: 1, size: 5_000 }];
      if (range === '1:1' && typeof query.source === 'object')
        return [{ uid: 1, flags: new Set(), size: 5_000, source: source(1) }];
      throw new Error(`fetched ${range} whole`);
    });
    await fetchNew(h, c, 'INBOX', { ...status, uidnext: 2 }, base);
    expect(c.asked).toEqual(['1:* sizes', '1:1 head']);
    expect(relayed(h).map((m) => m.too_large)).toEqual([true]);
  });
});
