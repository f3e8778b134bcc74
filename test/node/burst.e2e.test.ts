// A burst of mail while another mail program reads and cleans up as it arrives, at the shipped
// settings (15 s poll): real Dovecot (with and without CONDSTORE/QRESYNC), `npm start`, the real
// gateway. At quiescence the API equals the server, nothing is listed twice, and no email.delete is
// sent for a message that is still there. About 4.5 minutes: it runs with `npm run test:long`
// (LONG_E2E=1), not in `npm test`.
import type { ImapFlow } from 'imapflow';
import { describe, expect, it } from 'vitest';
import { connectMailbox } from './connect.ts';
import { endToEndSuite, eventMark, eventsSince, rfc822, type Suite } from './integrity-helpers.ts';
import { eventually } from './service.ts';

const MESSAGES = 1_600;
const FOLDERS = ['INBOX', 'Burst'];
/** A body of about 20 KB. */
const BODY = `${'burst body line, twenty kilobytes in all '.repeat(2).slice(0, 76)}\r\n`.repeat(262);

/** Message i: expunged by the other client when i % 5 = 0, marked \Seen when i % 3 = 0. */
const subjectOf = (i: number) => `burst ${i}`;
const indexOf = (subject: string) => Number(subject.split(' ')[1]);

/** What the server holds: subject → unread, over both folders (a subject lives in one folder). */
async function serverState(client: ImapFlow): Promise<Map<string, boolean>> {
  const state = new Map<string, boolean>();
  for (const folder of FOLDERS) {
    const lock = await client.getMailboxLock(folder);
    try {
      for await (const msg of client.fetch('1:*', { uid: true, flags: true, envelope: true }))
        state.set(msg.envelope?.subject ?? '', !msg.flags?.has('\\Seen'));
    } catch (err) {
      // An empty folder answers the FETCH with nothing or an error, depending on the server.
      if (!String(err).includes('Invalid messageset')) throw err;
    } finally {
      lock.release();
    }
  }
  return state;
}

/**
 * The other mail program: until `done`, looks at each folder, marks \Seen and expunges the messages
 * it has not seen yet as the rule says.
 */
async function cleanUpAsItArrives(client: ImapFlow, done: () => boolean): Promise<void> {
  const handled = new Set<string>();
  for (let last = false; !last; ) {
    last = done();
    for (const folder of FOLDERS) {
      const lock = await client.getMailboxLock(folder);
      try {
        const fresh: { uid: number; i: number }[] = [];
        for await (const msg of client.fetch('1:*', { uid: true, envelope: true }, { uid: true })) {
          const key = `${folder}:${msg.uid}`;
          if (handled.has(key) || !msg.envelope?.subject?.startsWith('burst ')) continue;
          handled.add(key);
          fresh.push({ uid: msg.uid, i: indexOf(msg.envelope.subject) });
        }
        const seen = fresh.filter((m) => m.i % 3 === 0 && m.i % 5 !== 0).map((m) => m.uid);
        const gone = fresh.filter((m) => m.i % 5 === 0).map((m) => m.uid);
        if (seen.length) await client.messageFlagsAdd(seen.join(','), ['\\Seen'], { uid: true });
        if (gone.length) await client.messageDelete(gone.join(','), { uid: true });
      } catch (err) {
        if (!String(err).includes('Invalid messageset')) throw err;
      } finally {
        lock.release();
      }
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

function burstCase(suite: Suite, user: string) {
  it('a burst of 1,600 messages while another client marks and expunges them: the API equals the server', async () => {
    const account = await connectMailbox(suite.service, suite.mail.info(), user);
    const appender = await suite.imap(user);
    const other = await suite.imap(user);
    const mark = eventMark(suite.service);
    await appender.mailboxCreate('Burst');

    let appended = false;
    const cleaning = cleanUpAsItArrives(other, () => appended);
    for (let i = 0; i < MESSAGES; i++)
      await appender.append(FOLDERS[i % 2]!, rfc822(subjectOf(i), '', `${subjectOf(i)}\r\n${BODY}`));
    appended = true;
    await cleaning;

    const server = await serverState(other);
    expect(server.size).toBe(MESSAGES - MESSAGES / 5);
    const listed = await eventually(
      async () => {
        const emails = (await suite.service.listEmails(account.id)).filter((e) => e.subject.startsWith('burst '));
        const api = new Map<string, boolean>(emails.map((e) => [e.subject, e.unread]));
        if (emails.length !== server.size || api.size !== server.size) return null;
        for (const [subject, unread] of server) if (api.get(subject) !== unread) return null;
        return emails;
      },
      { what: 'the API equal to the server', timeoutMs: 180_000, intervalMs: 1_000 },
    );
    // Nothing listed twice (by Message-ID), each email in exactly one folder.
    expect(new Set(listed.map((e) => e.message_id)).size).toBe(listed.length);
    expect(listed.filter((e) => e.folder_ids.length !== 1)).toEqual([]);
    const deleted = (await eventsSince(suite.service, account.id, mark))
      .filter((e) => e.type === 'email.delete')
      .map((e) => e.data.subject as string);
    expect(deleted.filter((subject) => server.has(subject))).toEqual([]);
    const news = (await eventsSince(suite.service, account.id, mark))
      .filter((e) => e.type === 'email.new')
      .map((e) => e.data.subject as string);
    // Every message still there got exactly one email.new.
    for (const subject of server.keys()) expect(news.filter((s) => s === subject).length, subject).toBe(1);
  }, 600_000);
}

const long = process.env.LONG_E2E === '1';

describe.runIf(long)('on Dovecot', () => {
  const suite = endToEndSuite('gw-burst', { defaults: true });
  burstCase(suite, 'alice');
});

describe.runIf(long)('on Dovecot without CONDSTORE and QRESYNC', () => {
  const suite = endToEndSuite('gw-burst-plain', {
    defaults: true,
    mail: { withoutCapabilities: ['CONDSTORE', 'QRESYNC'] },
  });
  burstCase(suite, 'alice');
});
