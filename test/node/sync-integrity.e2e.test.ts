// End to end, off the happy path: what a real mailbox does to folders and messages (renames, an
// unreadable folder, a UIDVALIDITY reset, duplicate copies, huge messages, actions on fresh mail)
// never loses, duplicates or renumbers an email. Real Dovecot, `npm start`, the real gateway.
import { chmodSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { connectMailbox } from './connect.ts';
import {
  bySubject,
  endToEndSuite,
  eventMark,
  eventsSince,
  rfc822,
  severalPolls,
  waitListed,
} from './integrity-helpers.ts';
import { eventually } from './service.ts';

const suite = endToEndSuite('gw-integrity');

describe('folders', () => {
  it('a renamed folder keeps its id and its emails ids, with one email.folder.update each and no email events', async () => {
    const client = await suite.imap('bob');
    await client.mailboxCreate('Projects');
    await client.mailboxCreate('OldOnly');
    await client.append('Projects', rfc822('projects before connect'));
    await client.append('OldOnly', rfc822('old-only before connect'));
    const bob = await connectMailbox(suite.service, suite.mail.info(), 'bob');
    await client.append('Projects', rfc822('projects after connect 1'));
    await client.append('Projects', rfc822('projects after connect 2'));
    const before = await waitListed(suite.service, bob.id, ['projects after connect 1', 'projects after connect 2']);
    const folders = (await suite.service.api('GET', `/folders?account_id=${bob.id}`)).body.data;
    const projects = folders.find((f: any) => f.provider_id === 'Projects');
    const oldOnly = folders.find((f: any) => f.provider_id === 'OldOnly');
    const mark = eventMark(suite.service);

    await client.mailboxRename('Projects', 'Work');
    await client.mailboxRename('OldOnly', 'Attic');
    const renamed = await eventually(
      async () => {
        const now = (await suite.service.api('GET', `/folders?account_id=${bob.id}`)).body.data;
        const work = now.find((f: any) => f.provider_id === 'Work');
        const attic = now.find((f: any) => f.provider_id === 'Attic');
        return work && attic ? { work, attic, all: now } : null;
      },
      { what: 'the renamed folders', timeoutMs: 30_000, intervalMs: 250 },
    );
    expect(renamed.work).toMatchObject({ id: projects.id, name: 'Work' });
    expect(renamed.attic).toMatchObject({ id: oldOnly.id, name: 'Attic' });
    expect(renamed.all.map((f: any) => f.provider_id)).not.toContain('Projects');
    await severalPolls();

    const after = await bySubject(suite.service, bob.id);
    expect([...after.keys()].sort()).toEqual(['projects after connect 1', 'projects after connect 2']);
    for (const subject of after.keys()) {
      expect(after.get(subject).id).toBe(before.get(subject).id);
      expect(after.get(subject).folder_ids).toEqual([projects.id]);
    }
    const events = await eventsSince(suite.service, bob.id, mark);
    expect(events.map((e) => e.type).sort()).toEqual(['email.folder.update', 'email.folder.update']);
    expect(events.map((e) => e.data.id).sort()).toEqual([projects.id, oldOnly.id].sort());
  });

  it('a folder the server cannot open for a while loses nothing, and the rest of the account syncs on', async () => {
    const carol = await connectMailbox(suite.service, suite.mail.info(), 'carol');
    const client = await suite.imap('carol');
    await client.mailboxCreate('Locked');
    await client.append('Locked', rfc822('locked 1'));
    await client.append('Locked', rfc822('locked 2'));
    const before = await waitListed(suite.service, carol.id, ['locked 1', 'locked 2']);
    const mark = eventMark(suite.service);

    const dir = suite.mail.maildirOf('carol', 'Locked');
    chmodSync(dir, 0o000);
    try {
      // A fresh suite.gateway (new sessions) must read every folder, so it meets the refusal for certain.
      await suite.gateway.kill('SIGKILL');
      suite.gateway = suite.service.startGateway('gw-integrity', suite.gatewayEnv());
      await suite.mail.deliver({
        from: 'x@remote.test',
        to: 'carol@example.test',
        subject: 'inbox meanwhile',
        text: 'hi',
      });
      await waitListed(suite.service, carol.id, ['inbox meanwhile']);
      await eventually(() => suite.gateway.log.some((l) => l.includes('folder refused by the server')), {
        what: 'the suite.gateway meeting the unreadable folder',
      });
      await severalPolls();
      const account = (await suite.service.api('GET', `/accounts/${carol.id}`)).body;
      expect(account.status).toBe('running');
      // Visible: the account's last_error names the folder and the server's refusal.
      expect(account.last_error).toMatch(/^folder Locked: the server refuses it/);
    } finally {
      chmodSync(dir, 0o700);
    }
    await client.append('Locked', rfc822('locked 3'));
    const after = await waitListed(suite.service, carol.id, ['locked 1', 'locked 2', 'locked 3', 'inbox meanwhile']);
    for (const subject of ['locked 1', 'locked 2']) expect(after.get(subject).id).toBe(before.get(subject).id);
    // The gateway logs it once the pass that read the folder again is over (just after its batch landed).
    await eventually(() => suite.gateway.log.some((l) => l.includes('folder readable again')), {
      what: 'the gateway reading the folder again',
    });
    await eventually(async () => (await suite.service.api('GET', `/accounts/${carol.id}`)).body.last_error === null, {
      what: 'last_error cleared once the folder is read again',
    });
    const types = (await eventsSince(suite.service, carol.id, mark)).map((e) => e.type);
    expect(types.filter((t) => t !== 'email.new').sort()).toEqual([]);
    expect(types.filter((t) => t === 'email.new')).toHaveLength(2);
  });
});

describe('messages', () => {
  it('keeps every id through a UIDVALIDITY reset of 2,000 synced messages, initial-sync mail included', async () => {
    const client = await suite.imap('dave');
    const old = new Date(Date.now() - 60 * 24 * 3600 * 1000);
    await client.append('INBOX', rfc822('far too old'), [], old);
    for (let i = 1; i <= 3; i++) await client.append('INBOX', rfc822(`recent before connect ${i}`));
    const dave = await connectMailbox(suite.service, suite.mail.info(), 'dave', {
      initial_sync_enable: true,
      initial_sync_days: 7,
    });
    await waitListed(suite.service, dave.id, [
      'recent before connect 1',
      'recent before connect 2',
      'recent before connect 3',
    ]);
    const subjects = Array.from({ length: 2000 }, (_, i) => `bulk ${i}`);
    await client.mailboxOpen('INBOX');
    for (const subject of subjects) await client.append('INBOX', rfc822(subject));
    const before = await waitListed(suite.service, dave.id, subjects, 240_000);
    expect(before.size).toBe(2003);
    const mark = eventMark(suite.service);

    const status = await client.status('INBOX', { uidValidity: true });
    await client.logout();
    await suite.mail.doveadm([
      'mailbox',
      'update',
      '--uid-validity',
      String(Number(status && status.uidValidity) + 1000),
      '-u',
      'dave',
      'INBOX',
    ]);
    await suite.mail.deliver({
      from: 'x@remote.test',
      to: 'dave@example.test',
      subject: 'after the reset',
      text: 'hi',
    });
    const after = await waitListed(suite.service, dave.id, [...subjects, 'after the reset'], 240_000);
    // The re-read is over once no membership is stale any more.
    await eventually(
      () =>
        suite.service.mailQuery<{ n: number }>(
          dave.id,
          'SELECT COUNT(*) AS n FROM email_folders WHERE account_id = ? AND uid < 0',
          dave.id,
        )[0]?.n === 0,
      { what: 'the end of the re-read', timeoutMs: 240_000, intervalMs: 500 },
    );
    await severalPolls();
    const final = await bySubject(suite.service, dave.id);
    expect(final.size).toBe(2004);
    expect(final.has('far too old')).toBe(false);
    for (const [subject, email] of before) expect(final.get(subject)?.id, subject).toBe(email.id);
    const types = (await eventsSince(suite.service, dave.id, mark)).map((e) => e.type);
    expect(types.filter((t) => t === 'email.delete')).toEqual([]);
    expect(types.filter((t) => t === 'email.new')).toHaveLength(1);
    expect(after.get('after the reset')).toBeDefined();
  }, 600_000);

  it('lists two copies of one message as two emails; expunging one leaves the other', async () => {
    const erin = await connectMailbox(suite.service, suite.mail.info(), 'erin');
    const client = await suite.imap('erin');
    const raw = rfc822('twice');
    await client.append('INBOX', raw);
    await client.append('INBOX', raw);
    const copies = await eventually(
      async () => {
        const twice = (await suite.service.listEmails(erin.id)).filter((e: any) => e.subject === 'twice');
        return twice.length === 2 ? twice : null;
      },
      { what: 'two copies listed', timeoutMs: 30_000, intervalMs: 250 },
    );
    expect(new Set(copies.map((e: any) => e.id)).size).toBe(2);
    const mark = eventMark(suite.service);

    await client.mailboxOpen('INBOX');
    const uids = (await client.search({ subject: 'twice' }, { uid: true })) || [];
    expect(uids).toHaveLength(2);
    await client.messageDelete(String(uids[0]), { uid: true });
    const deleted = await eventually(
      async () => (await eventsSince(suite.service, erin.id, mark)).find((e) => e.type === 'email.delete'),
      {
        what: 'email.delete of one copy',
        timeoutMs: 30_000,
        intervalMs: 250,
      },
    );
    await severalPolls();
    const left = (await suite.service.listEmails(erin.id)).filter((e: any) => e.subject === 'twice');
    expect(left).toHaveLength(1);
    expect(copies.map((e: any) => e.id)).toContain(left[0].id);
    expect(left[0].id).not.toBe(deleted.data.id);
    expect((await eventsSince(suite.service, erin.id, mark)).filter((e) => e.type === 'email.delete')).toHaveLength(1);
  });
});
