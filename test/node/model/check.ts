/**
 * The model's judge: at quiescence the API (D1, which the API reads, and GET /emails) equals the
 * server, ids did not change, and the events told the truth.
 */
import type { ImapFlow } from 'imapflow';
import type { Service } from '../service.ts';

export interface Instance {
  path: string;
  uid: number;
  modelId: number;
  seen: boolean;
  flagged: boolean;
}

interface Stored {
  path: string;
  uid: number;
  email_id: string;
  subject: string;
  unread: number;
  starred: number;
}

/** Every message on the server, folder by folder. */
export async function readServer(client: ImapFlow): Promise<Instance[]> {
  const out: Instance[] = [];
  for (const folder of await client.list()) {
    if (folder.flags.has('\\Noselect')) continue;
    const lock = await client.getMailboxLock(folder.path, { readOnly: true });
    try {
      if (!client.mailbox || client.mailbox.exists === 0) continue;
      for await (const msg of client.fetch('1:*', { uid: true, flags: true, headers: ['x-model-id'] })) {
        const id = /X-Model-Id:\s*(\d+)/i.exec(msg.headers?.toString() ?? '');
        out.push({
          path: folder.path,
          uid: msg.uid,
          modelId: id ? Number(id[1]) : -1,
          seen: msg.flags?.has('\\Seen') ?? false,
          flagged: msg.flags?.has('\\Flagged') ?? false,
        });
      }
    } finally {
      lock.release();
    }
  }
  return out;
}

function readStored(service: Service, accountId: string): { memberships: Stored[]; emails: number } {
  const memberships = service.mailQuery<Stored>(
    accountId,
    `SELECT f.provider_id AS path, ef.uid, e.id AS email_id, e.subject, e.unread, e.starred
     FROM email_folders ef JOIN folders f ON f.id = ef.folder_id JOIN emails e ON e.id = ef.email_id
     WHERE ef.account_id = ?`,
    accountId,
  );
  const emails = service.mailQuery<{ n: number }>(
    accountId,
    'SELECT COUNT(*) AS n FROM emails WHERE account_id = ?',
    accountId,
  )[0]!.n;
  return { memberships, emails };
}

/** What differs between the server and the API now (empty when they agree). */
export function differences(server: Instance[], service: Service, accountId: string): string[] {
  const { memberships, emails } = readStored(service, accountId);
  const problems: string[] = [];
  const key = (path: string, uid: number) => `${path}#${uid}`;
  const stored = new Map(memberships.map((m) => [key(m.path, m.uid), m]));
  const byEmail = new Map<string, Stored[]>();
  for (const m of memberships) byEmail.set(m.email_id, [...(byEmail.get(m.email_id) ?? []), m]);
  const onServer = new Map(server.map((i) => [key(i.path, i.uid), i]));

  for (const instance of server) {
    const m = stored.get(key(instance.path, instance.uid));
    if (!m) {
      problems.push(`missing: ${instance.path} UID ${instance.uid} (model ${instance.modelId})`);
      continue;
    }
    if (m.subject !== `model ${instance.modelId}`)
      problems.push(
        `${instance.path} UID ${instance.uid} is model ${instance.modelId} but its email says ${m.subject}`,
      );
    // One flag state per email, from its copies: read once any copy is \Seen, starred while any is \Flagged.
    const copies = byEmail
      .get(m.email_id)!
      .map((c) => onServer.get(key(c.path, c.uid)))
      .filter((c) => !!c);
    const unread = !copies.some((c) => c.seen);
    const starred = copies.some((c) => c.flagged);
    if ((m.unread === 1) !== unread || (m.starred === 1) !== starred)
      problems.push(
        `${instance.path} UID ${instance.uid}: unread ${m.unread} starred ${m.starred}, the server says unread ${unread} starred ${starred}`,
      );
  }
  for (const m of memberships)
    if (!onServer.has(key(m.path, m.uid)))
      problems.push(`extra: ${m.path} UID ${m.uid} (${m.subject}, ${m.email_id}) is not on the server`);
  if (emails !== byEmail.size) problems.push(`${emails - byEmail.size} emails are in no folder`);
  return problems;
}

/** Model id → its email id, for model messages with exactly one instance that were not copied. */
export function singleInstanceIds(server: Instance[], service: Service, accountId: string): Map<number, string> {
  const { memberships } = readStored(service, accountId);
  const stored = new Map(memberships.map((m) => [`${m.path}#${m.uid}`, m.email_id]));
  const count = new Map<number, number>();
  for (const i of server) count.set(i.modelId, (count.get(i.modelId) ?? 0) + 1);
  const out = new Map<number, string>();
  for (const i of server) {
    const emailId = stored.get(`${i.path}#${i.uid}`);
    if (count.get(i.modelId) === 1 && emailId) out.set(i.modelId, emailId);
  }
  return out;
}

/** Events that lied: a delete of an email that is still there, a second email.new (or email.draft.new) for one email, an email without one. */
export function eventProblems(service: Service, accountId: string): string[] {
  const events = service.mailQuery<{ type: string; id: string }>(
    accountId,
    `SELECT type, json_extract(data_json, '$.id') AS id FROM events WHERE account_id = ?
     AND type IN ('email.new', 'email.draft.new', 'email.delete', 'email.draft.delete')`,
    accountId,
  );
  const present = new Set(
    service
      .mailQuery<{ id: string }>(accountId, 'SELECT id FROM emails WHERE account_id = ?', accountId)
      .map((r) => r.id),
  );
  const problems: string[] = [];
  const news = new Map<string, number>();
  for (const e of events) {
    if (e.type.endsWith('.new')) news.set(e.id, (news.get(e.id) ?? 0) + 1);
    else if (present.has(e.id)) problems.push(`email.delete for ${e.id}, which is still there`);
  }
  for (const [id, n] of news) if (n > 1) problems.push(`${n} email.new events for ${id}`);
  for (const id of present) if (!news.has(id)) problems.push(`no email.new for ${id}`);
  return problems;
}
