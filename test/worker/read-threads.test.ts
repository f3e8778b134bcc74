// Threading of synced mail and GET /{account_id}/emails/{email_id}/thread.
import { describe, expect, it } from 'vitest';
import { normalizeSubject } from '../../worker/threads/threader.ts';
import { api, expectError } from './helpers.ts';
import { EMAIL_FIELDS, listEmails, minute, readAccount, subjects } from './read-helpers.ts';
import { messageIn, outbox, rawMessage } from './sync-helpers.ts';

const byId = async (accountId: string) =>
  new Map((await listEmails(`account_id=${accountId}&limit=250`)).data.map((e: any) => [e.subject, e]));
const thread = (accountId: string, emailId: string, query = '') =>
  api('GET', `/${accountId}/emails/${emailId}/thread${query}`);

describe('GET /{account_id}/emails/{email_id}/thread', () => {
  it('returns a 5-message conversation oldest first, Sent copy in, draft out, one thread_id', async () => {
    const a = await readAccount();
    const me = `Alice <${a.email}>`;
    const ids = [1, 2, 3, 4, 5].map((i) => `<conv-${i}-${crypto.randomUUID()}@example.test>`);
    const refs = (n: number) => ids.slice(0, n).join(' ');
    await a.deliver('INBOX', { subject: 'Plan', messageId: ids[0], date: minute(1), to: me });
    await a.deliver('INBOX', {
      subject: 'Re: Plan',
      messageId: ids[1],
      inReplyTo: ids[0],
      references: refs(1),
      date: minute(2),
      from: 'Carol <carol@example.test>',
      to: me,
    });
    // The account's own reply, in Sent.
    await a.deliver('Sent', {
      subject: 'Re: Plan',
      messageId: ids[2],
      inReplyTo: ids[1],
      references: refs(2),
      date: minute(3),
      from: me,
      to: 'carol@example.test',
    });
    await a.deliver('INBOX', {
      subject: 'Re: Plan',
      messageId: ids[3],
      inReplyTo: ids[2],
      references: refs(3),
      date: minute(4),
      to: me,
    });
    await a.deliver('INBOX', {
      subject: 'Re: Plan',
      messageId: ids[4],
      inReplyTo: ids[3],
      references: refs(4),
      date: minute(5),
      to: me,
    });
    // A draft answering the last one: part of the thread in D1, but never in the thread response.
    await a.deliver('Drafts', {
      subject: 'Re: Plan',
      inReplyTo: ids[4],
      references: refs(5),
      date: minute(6),
      from: me,
      flags: ['\\Draft'],
    });
    // Unrelated mail with the same subject but no reply prefix stays out.
    await a.deliver('INBOX', { subject: 'Plan', date: minute(7) });

    const emails = (await listEmails(`account_id=${a.id}`)).data;
    const draft = emails.find((e: any) => e.object === 'Draft');
    const threaded = emails.filter((e: any) => e.thread_id === draft.thread_id);
    expect(threaded).toHaveLength(6);
    const middle = threaded.find((e: any) => e.message_id === ids[2]);

    const res = await thread(a.id, middle.id);
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(['data', 'has_more', 'id', 'object']);
    expect(res.body).toMatchObject({ object: 'Thread', id: draft.thread_id, has_more: false });
    expect(res.body.id).toMatch(/^thr_[0-9A-Z]{26}$/);
    expect(res.body.data).toHaveLength(5);
    expect(res.body.data.map((e: any) => e.date)).toEqual(
      [1, 2, 3, 4, 5].map((m) => new Date(Date.UTC(2026, 0, 1) + m * 60_000).toISOString()),
    );
    expect(new Set(res.body.data.map((e: any) => e.thread_id))).toEqual(new Set([draft.thread_id]));
    expect(res.body.data.map((e: any) => e.id)).not.toContain(draft.id);
    const sent = res.body.data[2];
    expect(sent.from_attendee).toEqual({
      identifier: a.email,
      display_name: 'Alice',
      identifier_type: 'EMAIL_ADDRESS',
    });
    // The single variant, exactly.
    expect(Object.keys(sent).sort()).toEqual(
      [...EMAIL_FIELDS, 'headers', 'origin', 'tracking_id', 'is_unread', 'is_complete'].sort(),
    );
    expect(sent).toMatchObject({ object: 'Email', is_complete: true, is_unread: true });

    // The thread of the draft itself: the same five.
    expect((await thread(a.id, draft.id)).body.data).toHaveLength(5);
    const limited = await thread(a.id, middle.id, '?limit=2');
    expect(limited.body.data).toHaveLength(2);
    expect(limited.body.has_more).toBe(true);
  });

  it('answers 404 for unknown, malformed or foreign emails', async () => {
    const a = await readAccount();
    const b = await readAccount();
    await a.deliver('INBOX', { subject: 'mine' });
    const [email] = (await listEmails(`account_id=${a.id}`)).data;
    expect((await thread(a.id, email.id)).status).toBe(200);
    expectError(await thread(b.id, email.id), 404, 'not_found');
    expectError(await thread(a.id, 'email_nope'), 404, 'not_found');
    expectError(await thread(a.id, 'email_01KAAAAAAAAAAAAAAAAAAAAAAA'), 404, 'not_found');
    expectError(await thread('acc_nope', email.id), 404, 'not_found');
    expectError(await thread(a.id, email.id.replace('email_', 'att_')), 404, 'not_found');
  });
});

describe('threading', () => {
  it('keeps a reply that arrives before its parent in one thread', async () => {
    const a = await readAccount();
    const parent = '<late-parent@example.test>';
    await a.deliver('INBOX', { subject: 'Re: early', inReplyTo: parent, references: parent, date: minute(2) });
    await a.deliver('INBOX', { subject: 'early', messageId: parent, date: minute(1) });
    const e = await byId(a.id);
    expect(e.get('early').thread_id).toBe(e.get('Re: early').thread_id);
    expect((await thread(a.id, e.get('early').id)).body.data.map((x: any) => x.subject)).toEqual([
      'early',
      'Re: early',
    ]);
  });

  it('threads parent and reply delivered in the same batch, in either order', async () => {
    const a = await readAccount();
    const parent = '<same-batch@example.test>';
    await a.deliver(
      'INBOX',
      { subject: 'Re: batch', inReplyTo: parent, references: parent, date: minute(2) },
      { subject: 'batch', messageId: parent, date: minute(1) },
    );
    const e = await byId(a.id);
    expect(e.get('batch').thread_id).toBe(e.get('Re: batch').thread_id);
  });

  it('joins siblings that only share an ancestor that never arrived', async () => {
    const a = await readAccount();
    const ancestor = '<never-arrived@example.test>';
    await a.deliver('INBOX', {
      subject: 'Re: lost',
      messageId: '<sib-1@example.test>',
      inReplyTo: ancestor,
      references: ancestor,
    });
    await a.deliver('INBOX', { subject: 'Re: lost (2)', references: `${ancestor} <other-missing@example.test>` });
    const e = await byId(a.id);
    expect(e.get('Re: lost').thread_id).toBe(e.get('Re: lost (2)').thread_id);
  });

  it('merges two threads that turn out to be one: the later thread takes the earlier id', async () => {
    const a = await readAccount();
    const x = '<merge-x@example.test>';
    const y = '<merge-y@example.test>';
    await a.deliver('INBOX', { subject: 'first', messageId: x, date: minute(1) });
    await a.deliver('INBOX', { subject: 'second', messageId: y, date: minute(2) });
    await a.deliver('INBOX', { subject: 'answer to second', inReplyTo: y, references: y, date: minute(3) });
    let e = await byId(a.id);
    const earlier = e.get('first').thread_id;
    expect(e.get('second').thread_id).not.toBe(earlier);
    await a.deliver('INBOX', { subject: 'links both', references: `${x} ${y}`, date: minute(4) });
    e = await byId(a.id);
    for (const s of ['second', 'answer to second', 'links both']) expect(e.get(s).thread_id, s).toBe(earlier);
    expect((await thread(a.id, e.get('second').id)).body.data.map((m: any) => m.subject)).toEqual([
      'first',
      'second',
      'answer to second',
      'links both',
    ]);
    // Subscribers hear of the emails that changed conversation.
    const moved = (await outbox(a.id))
      .filter((ev) => ev.type === 'email.update')
      .map((ev) => [ev.data.subject, ev.data.thread_id]);
    expect(moved.sort()).toEqual([
      ['answer to second', earlier],
      ['second', earlier],
    ]);
  });

  it('falls back to the subject only for replies without threading headers, within 30 days', async () => {
    const a = await readAccount();
    const day = 24 * 60;
    await a.deliver('INBOX', { subject: 'Budget 2026', date: minute(0) });
    await a.deliver(
      'INBOX',
      { subject: 'AW: re:  budget   2026', date: minute(day) },
      { subject: 'Budget 2026', date: minute(2 * day) },
      { subject: 'Re: Budget 2026', references: '<unrelated@example.test>', date: minute(3 * day) },
    );
    await a.deliver('INBOX', { subject: 'Re: Budget 2026', date: minute(70 * day) });
    const all = (await listEmails(`account_id=${a.id}`)).data;
    const threadOf = (subject: string, days: number) =>
      all.find(
        (e: any) =>
          e.subject === subject && e.date.startsWith(new Date(Date.UTC(2026, 0, 1 + days)).toISOString().slice(0, 10)),
      ).thread_id;
    const original = threadOf('Budget 2026', 0);
    expect(threadOf('AW: re:  budget   2026', 1)).toBe(original);
    // No reply prefix: a new conversation, whatever the subject.
    expect(threadOf('Budget 2026', 2)).not.toBe(original);
    // Has References: headers decide, the subject is not consulted (a conversation of its own).
    expect([original, threadOf('Budget 2026', 2)]).not.toContain(threadOf('Re: Budget 2026', 3));
    // Beyond 30 days of everything with that subject: new conversation.
    const late = threadOf('Re: Budget 2026', 70);
    expect([original, threadOf('Budget 2026', 2), threadOf('Re: Budget 2026', 3)]).not.toContain(late);
  });

  it('normalizes subjects', () => {
    expect(normalizeSubject('Re: AW: Fwd:  Hello   World')).toEqual({ base: 'hello world', isReply: true });
    expect(normalizeSubject('SV: Re[2]: x')).toEqual({ base: 'x', isReply: true });
    expect(normalizeSubject('Hello')).toEqual({ base: 'hello', isReply: false });
    expect(normalizeSubject('Reply needed')).toEqual({ base: 'reply needed', isReply: false });
  });

  it('keeps Gmail conversations by X-GM-THRID', async () => {
    const a = await readAccount();
    const raw = (subject: string) =>
      rawMessage({ subject, date: minute(['gm one', 'gm two', 'gm other'].indexOf(subject)) });
    const applied = await a.stub.applyChanges(a.gateway, [
      {
        type: 'messages',
        path: 'INBOX',
        uidvalidity: 1,
        messages: [
          { ...messageIn(1, raw('gm one')), gm_msgid: '101', gm_thrid: '900' },
          { ...messageIn(2, raw('gm two')), gm_msgid: '102', gm_thrid: '900' },
          { ...messageIn(3, raw('gm other')), gm_msgid: '103', gm_thrid: '901' },
        ],
      },
    ]);
    expect(applied.ok).toBe(true);
    const e = await byId(a.id);
    expect(e.get('gm one').thread_id).toBe(e.get('gm two').thread_id);
    expect(e.get('gm other').thread_id).not.toBe(e.get('gm one').thread_id);
    expect(subjects((await thread(a.id, e.get('gm two').id)).body)).toEqual(['gm one', 'gm two']);
  });
});
