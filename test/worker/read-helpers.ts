/** Helpers of the read-side tests: a connected account that mail can be delivered to, folder by folder. */
import type { MessageIn } from '../../common/relay.ts';
import { api } from './helpers.ts';
import { createSyncedAccount, messageIn, rawMessage, type RawOptions } from './sync-helpers.ts';

const GATEWAY = 'gw-read';

/** The fields every variant of an email has (the spec's Email object); the variants add their own. */
export const EMAIL_FIELDS = [
  'object',
  'id',
  'account_id',
  'thread_id',
  'date',
  'subject',
  'body',
  'body_plain',
  'from_attendee',
  'to_attendees',
  'cc_attendees',
  'bcc_attendees',
  'reply_to_attendees',
  'has_attachments',
  'attachments',
  'folders',
];

export interface Mail extends RawOptions {
  flags?: string[];
}

/** An RFC 2822 date `minutes` after 2026-01-01T00:00Z (whole seconds, as Date headers carry). */
export const minute = (minutes: number) => new Date(Date.UTC(2026, 0, 1) + minutes * 60_000).toUTCString();

export async function readAccount(email?: string, options: { shard?: string } = {}) {
  const account = await createSyncedAccount(email, undefined, options);
  await account.stub.acquireLease(GATEWAY);
  const nextUid = new Map<string, number>();

  /** Deliver raw messages to a folder (the same raw in two folders is one email in both). */
  const deliverRaw = async (path: string, items: { raw: string; flags?: string[] }[]) => {
    const messages: MessageIn[] = items.map(({ raw, flags }) => {
      const uid = (nextUid.get(path) ?? 0) + 1;
      nextUid.set(path, uid);
      return messageIn(uid, raw, flags ?? []);
    });
    const applied = await account.stub.applyChanges(GATEWAY, [{ type: 'messages', path, uidvalidity: 1, messages }]);
    if (!applied.ok) throw new Error(JSON.stringify(applied));
  };
  const deliver = (path: string, ...mails: Mail[]) =>
    deliverRaw(
      path,
      mails.map((m) => ({ raw: rawMessage(m), flags: m.flags })),
    );

  return { ...account, gateway: GATEWAY, deliver, deliverRaw };
}

/** GET /emails with a query string; throws unless 200. */
export async function listEmails(query: string) {
  const res = await api('GET', `/emails?${query}`);
  if (res.status !== 200) throw new Error(`GET /emails?${query}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { object: string; data: any[]; has_more: boolean; cursor: string | null };
}

export const subjects = (list: { data: any[] }) => list.data.map((e) => e.subject);

/** A list's subjects in sorted order, where which emails it holds matters and their order does not. */
export const sorted = (list: { data: any[] }) => subjects(list).sort();
