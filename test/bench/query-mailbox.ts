/**
 * The query bench's mailbox: 100,000 emails (BENCH_QUERY_EMAILS) in five accounts over the past
 * year, written straight into the local D1 file in one transaction, rows shaped the way a sync writes
 * them: skewed senders, replies in threads, a share unread, starred or with attachments, from a
 * seeded generator.
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { mainRole } from '../../worker/folders/present.ts';
import { newId } from '../../worker/lib/ids.ts';
import { d1FileName, d1Folder, DIRECTORY } from '../node/d1-files.ts';
import type { Service } from '../node/service.ts';
import { prng } from '../shared/prng.ts';
import { mailboxInserts } from './query-tables.ts';

const EMAILS = Number(process.env.BENCH_QUERY_EMAILS ?? 100_000);
export const ACCOUNTS = 5;
const SENDERS = 50;
export const DAY = 86_400_000;

const TOPICS = [
  'invoice',
  'meeting',
  'report',
  'budget',
  'travel',
  'release',
  'contract',
  'hiring',
  'roadmap',
  'offsite',
  'newsletter',
  'security',
  'renewal',
  'feedback',
  'workshop',
  'delivery',
  'payment',
  'launch',
  'survey',
  'migration',
  'quarterly',
  'proposal',
  'schedule',
  'interview',
  'backup',
  'outage',
  'conference',
  'shipment',
  'reminder',
  'summary',
  'onboarding',
  'review',
  'planning',
  'webinar',
  'receipt',
  'license',
  'update',
  'question',
  'request',
  'agenda',
];
const WORDS = (
  'the a to and of for in on with about please let me know if you have any questions thanks regards attached ' +
  'find below see here our team next week tomorrow today friday monday call notes draft final version numbers ' +
  'customer project office server account order status time plan idea point issue change progress document ' +
  'would could should will can may need want think hope share send check confirm follow up quick note again'
).split(' ');
const FIRST = ['Alex', 'Sam', 'Maria', 'Chen', 'Priya', 'Jonas', 'Fatima', 'Luca', 'Ines', 'Kofi'];
const LAST = ['Smith', 'Garcia', 'Müller', 'Rossi', 'Nakamura'];
const FOLDERS = [
  { path: 'INBOX', role: 'INBOX', special: null, share: 0.55, unread: 0.45 },
  { path: 'Sent', role: 'SENT', special: '\\Sent', share: 0.15, unread: 0 },
  { path: 'Archive', role: 'ARCHIVE', special: '\\Archive', share: 0.25, unread: 0.15 },
  { path: 'Trash', role: 'TRASH', special: '\\Trash', share: 0.05, unread: 0.2 },
] as const;

export interface Fixture {
  accounts: { id: string; email: string }[];
  senders: string[];
  file: string;
  counts: {
    emails: number;
    memberships: number;
    participants: number;
    unread: number;
    starred: number;
    attachments: number;
  };
  loadSeconds: number;
}

/** The directory's database file (DB), where the bench's accounts live whatever MAIL_SHARDS is. */
export const d1File = (service: Service): string => join(d1Folder(service.stateDir), d1FileName(DIRECTORY));

/** 100,000 emails in ~5 accounts, written the way a sync writes them, in one transaction. */
export function load(file: string): Fixture {
  const t0 = performance.now();
  const rand = prng(4);
  const pick = <T>(list: readonly T[]) => list[Math.floor(rand() * list.length)]!;
  const words = (n: number) => Array.from({ length: n }, () => pick(WORDS)).join(' ');
  const db = new DatabaseSync(file);
  const now = Date.now();
  const nowIso = new Date(now).toISOString();
  const senders = Array.from({ length: SENDERS }, (_, k) => `sender${k}@remote.test`);
  const senderName = (k: number) => `${FIRST[k % FIRST.length]} ${LAST[Math.floor(k / FIRST.length) % LAST.length]}`;
  const counts = { emails: 0, memberships: 0, participants: 0, unread: 0, starred: 0, attachments: 0 };
  const accounts: Fixture['accounts'] = [];

  const { account, folder, email, membership, accountNumber, participant, attachment, fts, threadKey, contact } =
    mailboxInserts(db);

  let emailNumber = 0;
  db.exec('BEGIN');
  try {
    for (let a = 0; a < ACCOUNTS; a++) {
      const accountId = newId('account', now - 400 * DAY + a);
      const address = `user${a}@example.test`;
      accounts.push({ id: accountId, email: address });
      accountNumber.run(accountId, a + 1);
      account.run(
        accountId,
        'imap',
        address,
        `User ${a}`,
        address,
        'imap.example.test',
        993,
        'SSL',
        'smtp.example.test',
        587,
        'STARTTLS',
        address,
        'bench-placeholder-not-decryptable',
        'running',
        'completed',
        nowIso,
        nowIso,
        nowIso,
      );
      const folderIds = FOLDERS.map((f) => {
        const id = newId('folder');
        folder.run(id, accountId, f.path, f.path, f.role, null, '/', 0, nowIso, nowIso);
        return id;
      });
      const uids = FOLDERS.map(() => 1);
      const contacts = new Map<number, { count: number; last: number }>();

      // Oldest first, so a reply can name an earlier message of the same mailbox.
      const perAccount = Math.floor(EMAILS / ACCOUNTS) + (a < EMAILS % ACCOUNTS ? 1 : 0);
      const dates = Array.from({ length: perAccount }, () => now - Math.floor(rand() * 365 * DAY)).sort(
        (x, y) => x - y,
      );
      const earlier: { messageId: string; threadId: string; subject: string }[] = [];
      for (const [i, dateMs] of dates.entries()) {
        const r = rand();
        let f = 0;
        for (let acc = FOLDERS[0]!.share; f < FOLDERS.length - 1 && r > acc; ) acc += FOLDERS[++f]!.share;
        const home = FOLDERS[f]!;
        // Skewed senders: a few write a lot, most rarely.
        const k = Math.floor(SENDERS * rand() ** 2);
        const outgoing = home.role === 'SENT';
        const from = outgoing ? { address, name: `User ${a}` } : { address: senders[k]!, name: senderName(k) };
        const to = outgoing ? [{ address: senders[k]!, name: senderName(k) }] : [{ address, name: `User ${a}` }];
        const cc = rand() < 0.1 ? [{ address: senders[(k + 7) % SENDERS]!, name: senderName((k + 7) % SENDERS) }] : [];

        const reply =
          earlier.length > 0 && rand() < 0.2
            ? earlier[Math.max(0, earlier.length - 1 - Math.floor(rand() * 200))]!
            : null;
        const subject = reply
          ? `Re: ${reply.subject.replace(/^Re: /, '')}`
          : `${pick(TOPICS)} ${pick(TOPICS)}: ${words(4)}`;
        const body = `Hi,\n\n${words(40 + Math.floor(rand() * 60))}.\n\n${from.name}`;
        const messageId = `<${createHash('sha1').update(`${a}-${i}`).digest('hex').slice(0, 20)}@${outgoing ? 'example.test' : 'remote.test'}>`;
        const threadId = reply ? reply.threadId : newId('thread', dateMs);
        const id = newId('email', dateMs);
        const identity = `mid:${createHash('sha256').update(`${messageId}\n${i}`).digest('hex')}`;
        const digest = createHash('sha256').update(`${accountId}\n${identity}`).digest('hex').slice(0, 40);
        const unread = rand() < home.unread ? 1 : 0;
        const starred = rand() < 0.05 ? 1 : 0;
        const hasAttachments = rand() < 0.1 ? 1 : 0;
        const folders = [f];
        if (home.role === 'INBOX' && rand() < 0.03) folders.push(2); // also copied to Archive
        const date = new Date(dateMs).toISOString();
        const headers = [
          { name: 'Return-Path', value: `<${from.address}>` },
          {
            name: 'Received',
            value: `from mx.remote.test by mail.example.test with ESMTPS; ${new Date(dateMs).toUTCString()}`,
          },
          { name: 'From', value: `${from.name} <${from.address}>` },
          { name: 'To', value: to.map((t) => `${t.name} <${t.address}>`).join(', ') },
          ...(cc.length ? [{ name: 'Cc', value: `${cc[0]!.name} <${cc[0]!.address}>` }] : []),
          { name: 'Subject', value: subject },
          { name: 'Date', value: new Date(dateMs).toUTCString() },
          { name: 'Message-ID', value: messageId },
          ...(reply
            ? [
                { name: 'In-Reply-To', value: reply.messageId },
                { name: 'References', value: reply.messageId },
              ]
            : []),
          { name: 'MIME-Version', value: '1.0' },
          {
            name: 'Content-Type',
            value: hasAttachments ? 'multipart/mixed; boundary="b1"' : 'multipart/alternative; boundary="b0"',
          },
        ];

        email.run(
          id,
          accountId,
          identity,
          threadId,
          null,
          messageId,
          reply?.messageId ?? null,
          JSON.stringify(reply ? [reply.messageId] : []),
          date,
          dateMs,
          subject,
          body.replace(/\s+/g, ' ').slice(0, 200),
          JSON.stringify(from),
          JSON.stringify(to),
          JSON.stringify(cc),
          '[]',
          '[]',
          from.address,
          `<div dir="ltr">${body.replace(/\n/g, '<br>')}</div>`,
          body,
          null,
          JSON.stringify(headers),
          `raw/${accountId}/${digest}.eml`,
          2_000 + body.length * 2 + hasAttachments * 50_000,
          hasAttachments,
          unread,
          starred,
          0,
          mainRole(folders.map((x) => FOLDERS[x]!.role)),
          'external',
          null,
          null,
          date,
          date,
          ++emailNumber,
        );
        for (const x of folders) {
          membership.run(id, folderIds[x]!, accountId, uids[x]!++);
          counts.memberships++;
        }
        for (const [kind, list] of [
          ['from', [from]],
          ['to', to],
          ['cc', cc],
        ] as const) {
          for (const p of list) {
            participant.run(emailNumber, kind, p.address, a + 1);
            counts.participants++;
          }
        }
        if (hasAttachments) {
          attachment.run(
            newId('attachment'),
            id,
            accountId,
            `${pick(TOPICS)}.pdf`,
            'pdf',
            48_000,
            'application/pdf',
            null,
            0,
            `att/${accountId}/${digest}/0`,
          );
        }
        fts.run(emailNumber, subject, body, [from, ...to, ...cc].map((p) => `${p.name} ${p.address}`).join(' '));
        threadKey.run(accountId, messageId, id);
        if (reply) threadKey.run(accountId, reply.messageId, id);
        const seen = contacts.get(k) ?? { count: 0, last: 0 };
        contacts.set(k, { count: seen.count + 1, last: Math.max(seen.last, dateMs) });
        earlier.push({ messageId, threadId, subject });
        counts.emails++;
        counts.unread += unread;
        counts.starred += starred;
        counts.attachments += hasAttachments;
      }
      for (const [k, c] of contacts)
        contact.run(accountId, senders[k]!, senderName(k), c.count, new Date(c.last).toISOString(), c.last);
      db.prepare(
        'UPDATE folders SET total_count = (SELECT COUNT(*) FROM email_folders ef WHERE ef.folder_id = folders.id) WHERE account_id = ?',
      ).run(accountId);
    }
    db.exec('COMMIT');
  } catch (err) {
    db.exec('ROLLBACK');
    throw err;
  } finally {
    db.close();
  }
  return { accounts, senders, file, counts, loadSeconds: (performance.now() - t0) / 1000 };
}
