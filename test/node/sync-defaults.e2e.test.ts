// End to end at the settings people run: the gateway starts with the shipped poll interval (no
// GATEWAY_POLL_INTERVAL_MS), so a folder nobody IDLEs on is looked at only every 15 s. Real Dovecot,
// `npm start`, the real gateway.
import { describe, expect, it } from 'vitest';
import { connectMailbox } from './connect.ts';
import { bySubject, endToEndSuite, eventMark, eventsSince, rfc822, waitListed } from './integrity-helpers.ts';
import { eventually } from './service.ts';

const suite = endToEndSuite('gw-defaults', { defaults: true });

/** The shipped poll interval (gateway/connection-settings.ts). */
const DEFAULT_POLL_MS = 15_000;

describe('at the default poll interval', () => {
  it('keeps the ids of messages moved into folders created a moment before: one email.update each, nothing deleted or new', async () => {
    const alice = await connectMailbox(suite.service, suite.mail.info(), 'alice');
    const client = await suite.imap('alice');
    const subjects = Array.from({ length: 8 }, (_, i) => `moved into a new folder ${i}`);
    for (const subject of subjects) await client.append('INBOX', rfc822(subject));
    const before = await waitListed(suite.service, alice.id, subjects);
    const mark = eventMark(suite.service);

    // Another mail program: "new folder", then move the message into it, eight times in a row.
    await client.mailboxOpen('INBOX');
    for (const [i, subject] of subjects.entries()) {
      const folder = `Fresh ${i}`;
      await client.mailboxCreate(folder);
      const [uid] = (await client.search({ subject }, { uid: true })) || [];
      expect(uid, subject).toBeDefined();
      await client.messageMove(String(uid), folder, { uid: true });
    }

    const folderIds = await eventually(
      async () => {
        const res = await suite.service.api('GET', `/folders?account_id=${alice.id}`);
        const byPath = new Map((res.body as any).data.map((f: any) => [f.provider_id, f.id]));
        const ids = subjects.map((_, i) => byPath.get(`Fresh ${i}`));
        return ids.every(Boolean) ? (ids as string[]) : null;
      },
      { what: 'the new folders listed', timeoutMs: 4 * DEFAULT_POLL_MS, intervalMs: 250 },
    );
    await eventually(
      async () => {
        const listed = await bySubject(suite.service, alice.id);
        return subjects.every((s, i) => listed.get(s)?.folder_ids?.join() === folderIds[i]) ? listed : null;
      },
      { what: 'every message listed in its new folder', timeoutMs: 4 * DEFAULT_POLL_MS, intervalMs: 250 },
    );
    // Two more poll intervals: long past the moment a timer would have given up on the moves.
    await new Promise((r) => setTimeout(r, 2 * DEFAULT_POLL_MS));

    const after = await bySubject(suite.service, alice.id);
    for (const [i, subject] of subjects.entries()) {
      expect(after.get(subject)?.id, subject).toBe(before.get(subject).id);
      expect(after.get(subject)?.folder_ids, subject).toEqual([folderIds[i]]);
    }
    const events = await eventsSince(suite.service, alice.id, mark);
    expect(events.filter((e) => e.type === 'email.delete')).toEqual([]);
    expect(events.filter((e) => e.type === 'email.new')).toEqual([]);
    const updates = events.filter((e) => e.type === 'email.update').map((e) => e.data.subject);
    expect(updates.sort()).toEqual([...subjects].sort());
  }, 240_000);
});
