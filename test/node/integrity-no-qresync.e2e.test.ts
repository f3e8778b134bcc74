// Integrity on a server without CONDSTORE and QRESYNC, at the shipped settings (15 s poll): expunges
// are found by comparing UID listings, so what the gateway last told the Worker about a folder must
// include mail relayed into it by another folder's catch-up.
import { describe, expect, it } from 'vitest';
import { connectMailbox } from './connect.ts';
import { endToEndSuite, eventMark, eventsSince, rfc822, waitListed } from './integrity-helpers.ts';
import { eventually } from './service.ts';

const suite = endToEndSuite('gw-no-qresync', {
  defaults: true,
  mail: { withoutCapabilities: ['CONDSTORE', 'QRESYNC'] },
});

const folderId = (accountId: string, path: string) =>
  suite.service.mailQuery<{ id: string }>(
    accountId,
    'SELECT id FROM folders WHERE account_id = ? AND provider_id = ?',
    accountId,
    path,
  )[0]?.id;

const placesOf = (accountId: string, emailId: string) =>
  suite.service.mailQuery<{ folder_id: string; uid: number }>(
    accountId,
    'SELECT folder_id, uid FROM email_folders WHERE email_id = ?',
    emailId,
  );

describe('without QRESYNC', () => {
  it('a message moved in by a catch-up, then out and back before its folder is polled, keeps its id', async () => {
    const client = await suite.imap('alice');
    await client.mailboxCreate('Projects');
    await client.mailboxCreate('Elsewhere');
    const account = await connectMailbox(suite.service, suite.mail.info(), 'alice');
    // Projects' own pass relays this: the gateway then has a view of Projects to compare with.
    await client.append('Projects', rfc822('projects seed'));
    await waitListed(suite.service, account.id, ['projects seed'], 60_000);
    await client.append('INBOX', rfc822('out and back'));
    const email = (await waitListed(suite.service, account.id, ['out and back'])).get('out and back');
    const projects = folderId(account.id, 'Projects')!;
    const mark = eventMark(suite.service);

    // INBOX (IDLE) sees the move's expunge; its pass catches Projects up first, relaying the message there.
    await client.mailboxOpen('INBOX');
    const [inInbox] = (await client.search({ header: { subject: 'out and back' } }, { uid: true })) as number[];
    await client.messageMove(String(inInbox), 'Projects', { uid: true });
    await eventually(
      () => placesOf(account.id, email.id).length === 1 && placesOf(account.id, email.id)[0]!.folder_id === projects,
      {
        what: 'the move relayed',
        timeoutMs: 30_000,
      },
    );
    // At once (Projects is polled every 15 s): out to Elsewhere and back, under a new UID.
    await client.mailboxOpen('Projects');
    const [first] = (await client.search({ header: { subject: 'out and back' } }, { uid: true })) as number[];
    await client.messageMove(String(first), 'Elsewhere', { uid: true });
    await client.mailboxOpen('Elsewhere');
    const [away] = (await client.search({ header: { subject: 'out and back' } }, { uid: true })) as number[];
    await client.messageMove(String(away), 'Projects', { uid: true });
    await client.mailboxOpen('Projects');
    const [back] = (await client.search({ header: { subject: 'out and back' } }, { uid: true })) as number[];
    expect(back).toBeGreaterThan(first!);

    // The next poll relays the new UID; an email left in no folder would be deleted 10 s after.
    await eventually(
      () =>
        suite.service.mailQuery<{ n: number }>(
          account.id,
          'SELECT COUNT(*) AS n FROM email_folders WHERE folder_id = ? AND uid = ?',
          projects,
          back!,
        )[0]!.n === 1,
      { what: 'the new UID relayed', timeoutMs: 60_000, intervalMs: 250 },
    );
    await new Promise((r) => setTimeout(r, 15_000));
    const listed = (await suite.service.listEmails(account.id)).filter((e) => e.subject === 'out and back');
    expect(listed.map((e) => [e.id, e.folder_ids])).toEqual([[email.id, [projects]]]);
    const events = (await eventsSince(suite.service, account.id, mark)).map((e) => e.type);
    expect(events, 'no email came or went').not.toContain('email.new');
    expect(events).not.toContain('email.delete');
  }, 180_000);
});
