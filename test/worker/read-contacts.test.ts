// GET /contacts: the people an account emails with, counted as mail arrives and leaves.
import { readEveryFolder } from './sync-helpers.ts';
import { describe, expect, it } from 'vitest';
import { api, expectError } from './helpers.ts';
import { minute, readAccount, type Mail } from './read-helpers.ts';

const PEOPLE = ['ann', 'ben', 'cat', 'dan', 'eve', 'fay'].map((n) => ({
  address: `${n}@example.test`,
  name: n[0]!.toUpperCase() + n.slice(1),
}));

async function contacts(query: string) {
  const res = await api('GET', `/contacts?${query}`);
  if (res.status !== 200) throw new Error(`${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

describe('GET /contacts', () => {
  it('lists the right people with the right counts after 30 messages among 6 people, and follows deletions', async () => {
    const a = await readAccount();
    const me = `Me <${a.email}>`;
    // Message i: from person i % 6 to the account, with person (i + 1) % 6 in cc on every third one;
    // every fifth is the account's own mail (in Sent) to person i % 6.
    const expected = new Map<string, { count: number; last: number }>();
    const count = (address: string, i: number) => {
      const known = expected.get(address) ?? { count: 0, last: -1 };
      expected.set(address, { count: known.count + 1, last: Math.max(known.last, i) });
    };
    const inbox: Mail[] = [];
    const sent: Mail[] = [];
    for (let i = 0; i < 30; i++) {
      const person = PEOPLE[i % 6]!;
      const ccPerson = PEOPLE[(i + 1) % 6]!;
      const withCc = i % 3 === 0;
      const mail: Mail = {
        subject: `m${i}`,
        date: minute(i),
        ...(i % 5 === 0
          ? { from: me, to: `${person.name} <${person.address}>` }
          : { from: `${person.name} <${person.address}>`, to: me }),
        ...(withCc ? { cc: `${ccPerson.name} <${ccPerson.address}>, ${person.address}` } : {}),
      };
      (i % 5 === 0 ? sent : inbox).push(mail);
      count(person.address, i);
      if (withCc) count(ccPerson.address, i);
    }
    await a.deliver('INBOX', ...inbox);
    await a.deliver('Sent', ...sent);

    const iso = (m: number) => new Date(Date.UTC(2026, 0, 1) + m * 60_000).toISOString();
    const want = [...expected]
      .sort((x, y) => y[1].last - x[1].last || x[0].localeCompare(y[0]))
      .map(([address, { count, last }]) => ({
        object: 'Contact',
        account_id: a.id,
        identifier: address,
        display_name: PEOPLE.find((p) => p.address === address)!.name,
        emails_count: count,
        last_email_at: iso(last),
      }));
    const list = await contacts(`account_id=${a.id}`);
    expect(list).toMatchObject({ object: 'Contacts', has_more: false, cursor: null });
    expect(list.data).toEqual(want);
    expect(list.data.map((c: any) => c.identifier)).not.toContain(a.email);

    // Paging: most recent first, each contact once.
    const first = await contacts(`account_id=${a.id}&limit=4`);
    expect(first.has_more).toBe(true);
    const second = await contacts(`account_id=${a.id}&limit=4&cursor=${first.cursor}`);
    expect([...first.data, ...second.data]).toEqual(want);
    expectError(await api('GET', `/contacts?account_id=${a.id}&q=a&cursor=${first.cursor}`), 400, 'invalid_parameters');

    // Deleting the newest messages (inbox UIDs of m29, m28, m27): counts and dates follow.
    const inboxUids = inbox.map((m, i) => ({ subject: m.subject, uid: i + 1 }));
    const gone = inboxUids.filter((m) => ['m29', 'm28', 'm27'].includes(m.subject!));
    await a.stub.applyChanges(a.gateway, [
      { type: 'vanished', path: 'INBOX', uidvalidity: 1, uids: gone.map((g) => g.uid) },
    ]);
    await readEveryFolder(a.stub);
    const after = new Map<string, { count: number; last: number }>();
    for (let i = 0; i < 27; i++) {
      const bump = (address: string) => {
        const known = after.get(address) ?? { count: 0, last: -1 };
        after.set(address, { count: known.count + 1, last: Math.max(known.last, i) });
      };
      bump(PEOPLE[i % 6]!.address);
      if (i % 3 === 0) bump(PEOPLE[(i + 1) % 6]!.address);
    }
    const now = (await contacts(`account_id=${a.id}`)).data;
    expect(Object.fromEntries(now.map((c: any) => [c.identifier, [c.emails_count, c.last_email_at]]))).toEqual(
      Object.fromEntries([...after].map(([address, { count, last }]) => [address, [count, iso(last)]])),
    );
  });

  it('drops a contact whose last email is deleted', async () => {
    const a = await readAccount();
    await a.deliver('INBOX', { subject: 'only one', from: 'Once <once@example.test>', to: a.email });
    expect((await contacts(`account_id=${a.id}`)).data.map((c: any) => c.identifier)).toEqual(['once@example.test']);
    await a.stub.applyChanges(a.gateway, [{ type: 'vanished', path: 'INBOX', uidvalidity: 1, uids: [1] }]);
    await readEveryFolder(a.stub);
    expect((await contacts(`account_id=${a.id}`)).data).toEqual([]);
  });

  it('searches address and name, case-insensitively, per account', async () => {
    const a = await readAccount();
    const b = await readAccount();
    for (const acc of [a, b]) {
      await acc.deliver(
        'INBOX',
        { from: 'Zelda Fitzgerald <zf@example.test>', to: acc.email },
        { from: 'Scott <scott.fitz@example.test>', to: acc.email },
        { from: 'Other <other@example.test>', to: acc.email },
        { from: 'ÉMILE ÇA <emile@example.test>', to: acc.email },
      );
    }
    const found = (await contacts(`account_id=${a.id}&q=FITZ`)).data;
    expect(found.map((c: any) => c.identifier).sort()).toEqual(['scott.fitz@example.test', 'zf@example.test']);
    expect(found.every((c: any) => c.account_id === a.id)).toBe(true);
    expect((await contacts(`account_id=${a.id}&q=zelda`)).data.map((c: any) => c.identifier)).toEqual([
      'zf@example.test',
    ]);
    expect((await contacts(`account_id=${a.id}&q=${encodeURIComponent('%_"*')}`)).data).toEqual([]);
    // Beyond ASCII too.
    expect(
      (await contacts(`account_id=${a.id}&q=${encodeURIComponent('émile ça')}`)).data.map((c: any) => c.identifier),
    ).toEqual(['emile@example.test']);
  });

  it('unknown accounts have no contacts', async () => {
    expect((await contacts('account_id=acc_nope')).data).toEqual([]);
    expectError(await api('GET', '/contacts?account_id=acc_nope&limit=0'), 400, 'invalid_parameters');
  });

  it('without account_id lists every account, each contact once per account, and pages through them', async () => {
    const a = await readAccount();
    const b = await readAccount();
    const identifier = `shared.${a.id.slice(-6).toLowerCase()}@example.test`;
    const shared = `Shared Person <${identifier}>`;
    await a.deliver('INBOX', { subject: 'to a', from: shared, to: `Me <${a.email}>`, date: minute(90_000) });
    await b.deliver('INBOX', { subject: 'to b', from: shared, to: `Me <${b.email}>`, date: minute(90_000) });
    const all = await contacts(`q=${identifier}`);
    expect(all.data.map((c: any) => c.account_id).sort()).toEqual([a.id, b.id].sort());
    expect(all.data.every((c: any) => c.identifier === identifier && c.emails_count === 1)).toBe(true);

    // Paging one at a time over every contact meets each (account, identifier) exactly once.
    const everything = (await contacts('limit=250')).data.map((c: any) => `${c.account_id} ${c.identifier}`);
    const paged: string[] = [];
    let cursor: string | null = null;
    do {
      const page: any = await contacts(`limit=1${cursor ? `&cursor=${cursor}` : ''}`);
      paged.push(...page.data.map((c: any) => `${c.account_id} ${c.identifier}`));
      cursor = page.cursor;
    } while (cursor);
    expect(paged).toEqual(everything);
    expect(new Set(paged).size).toBe(paged.length);
    expect(paged).toContain(`${a.id} ${identifier}`);
    expect(paged).toContain(`${b.id} ${identifier}`);
  });
});
