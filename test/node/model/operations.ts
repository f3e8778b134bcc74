/**
 * What other mail clients (and the server) do to a mailbox, as seeded random operations against the
 * real Dovecot: append, copy (to the same or another folder), move, flag, unflag, expunge, create,
 * rename and delete folders, UIDVALIDITY resets, oversized messages; create a folder and move into
 * it at once, bursts of appends marked and expunged as they arrive, folders of thousands of messages,
 * messages over 64 MB, a gateway killed while it reads a renumbered folder again. Every message carries
 * `X-Model-Id`, so the checker can follow it; copies keep the id of their original.
 */
import type { ImapFlow } from 'imapflow';
import type { MailServer } from '../../mailserver/mailserver.ts';

export interface ModelContext {
  mail: MailServer;
  user: string;
  client: ImapFlow;
  random: () => number;
  /** Next X-Model-Id. */
  nextId: number;
  /** Model ids copied since the last check: their email ids may legitimately be shared or new. */
  copied: Set<number>;
  counts: Record<string, number>;
  /** What the operations did, newest last (shown with the problems a check finds). */
  trace: string[];
  /** Operations this run leaves out, by name (e.g. 'uidvalidity reset'). */
  leaveOut: Set<string>;
  /** SIGKILLs the gateway and starts a new one (the run counts it). */
  killGateway(): Promise<void>;
}

const note = (ctx: ModelContext, line: string) => {
  ctx.trace.push(line);
  if (ctx.trace.length > 200) ctx.trace.shift();
};

const USER_FOLDERS = ['Projects', 'Receipts', 'Travel', 'Old'];
const BASE_FOLDERS = ['INBOX', 'Archive', 'Trash'];

const pick = <T>(ctx: ModelContext, items: T[]): T => items[Math.floor(ctx.random() * items.length)]!;

export function messageOf(id: number, big = false, bodyBytes = 0): string {
  const filler = big ? Array.from({ length: 400 }, (_, i) => `X-Filler-${i}: ${'f'.repeat(900)}\r\n`).join('') : '';
  const body = bodyBytes ? `${'b'.repeat(76)}\r\n`.repeat(Math.ceil(bodyBytes / 78)) : '';
  return (
    `From: model@remote.test\r\nTo: user@example.test\r\nSubject: model ${id}\r\n` +
    `Message-ID: <model-${id}@remote.test>\r\nX-Model-Id: ${id}\r\nDate: ${new Date().toUTCString()}\r\n${filler}\r\n` +
    `Message ${id}.\r\n${body}`
  );
}

/** Over 64 MB: staged in parts, parsed from its head. */
const LARGE_MESSAGE_BYTES = 66 * 1024 * 1024;
/** A folder of thousands of messages (appended in one go). */
const THOUSANDS = 2_000;
const BURST = 40;

async function folders(ctx: ModelContext): Promise<string[]> {
  return (await ctx.client.list()).filter((f) => !f.flags.has('\\Noselect')).map((f) => f.path);
}

/** A random message of a random folder that has one: [folder, uid]. */
async function someMessage(ctx: ModelContext): Promise<[string, number] | null> {
  const all = await folders(ctx);
  for (let tries = 0; tries < 4; tries++) {
    const path = pick(ctx, all);
    const lock = await ctx.client.getMailboxLock(path);
    try {
      const uids = (await ctx.client.search({ all: true }, { uid: true })) || [];
      if (uids.length) return [path, pick(ctx, uids)];
    } finally {
      lock.release();
    }
  }
  return null;
}

async function modelIdOf(ctx: ModelContext, path: string, uid: number): Promise<number | null> {
  const lock = await ctx.client.getMailboxLock(path);
  try {
    const msg = await ctx.client.fetchOne(String(uid), { headers: ['x-model-id'] }, { uid: true });
    const match = msg && /X-Model-Id:\s*(\d+)/i.exec(msg.headers?.toString() ?? '');
    return match ? Number(match[1]) : null;
  } finally {
    lock.release();
  }
}

type Operation = (ctx: ModelContext) => Promise<void>;

const OPERATIONS: [number, string, Operation][] = [
  [
    30,
    'append',
    async (ctx) => {
      const path = pick(ctx, [...BASE_FOLDERS, 'INBOX', ...(await folders(ctx))]);
      const flags = ctx.random() < 0.3 ? ['\\Seen'] : [];
      const id = ctx.nextId++;
      const big = ctx.random() < 0.02;
      const done = await ctx.client.append(path, messageOf(id, big), flags);
      note(ctx, `append model ${id}${big ? ' (big)' : ''} to ${path}: UID ${done ? done.uid : '?'}`);
    },
  ],
  [8, 'copy', (ctx) => copyOrMove(ctx, 'copy')],
  [10, 'move', (ctx) => copyOrMove(ctx, 'move')],
  [12, 'flag', (ctx) => flag(ctx, true)],
  [8, 'unflag', (ctx) => flag(ctx, false)],
  [
    10,
    'expunge',
    async (ctx) => {
      const at = await someMessage(ctx);
      if (!at) return;
      const lock = await ctx.client.getMailboxLock(at[0]);
      try {
        await ctx.client.messageDelete(String(at[1]), { uid: true });
        note(ctx, `expunge ${at[0]} UID ${at[1]}`);
      } finally {
        lock.release();
      }
    },
  ],
  [
    3,
    'create folder',
    async (ctx) => {
      const existing = await folders(ctx);
      const name = USER_FOLDERS.find((f) => !existing.includes(f));
      if (name) await ctx.client.mailboxCreate(name);
      if (name) note(ctx, `create ${name}`);
    },
  ],
  [
    2,
    'rename folder',
    async (ctx) => {
      const existing = await folders(ctx);
      const from = existing.filter((f) => USER_FOLDERS.includes(f));
      const to = USER_FOLDERS.filter((f) => !existing.includes(f));
      if (!from.length || !to.length) return;
      const [a, b] = [pick(ctx, from), pick(ctx, to)];
      await ctx.client.mailboxRename(a, b);
      note(ctx, `rename ${a} to ${b}`);
    },
  ],
  [
    1,
    'delete folder',
    async (ctx) => {
      const user = (await folders(ctx)).filter((f) => USER_FOLDERS.includes(f));
      if (!user.length) return;
      const path = pick(ctx, user);
      await ctx.client.mailboxDelete(path);
      note(ctx, `delete folder ${path}`);
    },
  ],
  [
    1,
    'uidvalidity reset',
    async (ctx) => {
      const path = pick(ctx, await folders(ctx));
      const status = await ctx.client.status(path, { uidValidity: true });
      const next = Number(status && status.uidValidity) + 1 + Math.floor(ctx.random() * 1000);
      await ctx.mail.doveadm(['mailbox', 'update', '--uid-validity', String(next), '-u', ctx.user, path]);
      note(ctx, `uidvalidity of ${path} set to ${next}`);
    },
  ],
  [
    3,
    'create folder and move into it',
    async (ctx) => {
      const existing = await folders(ctx);
      const name = USER_FOLDERS.find((f) => !existing.includes(f));
      const at = name ? await someMessage(ctx) : null;
      if (!name || !at) return;
      await ctx.client.mailboxCreate(name);
      const id = await modelIdOf(ctx, at[0], at[1]);
      const lock = await ctx.client.getMailboxLock(at[0]);
      try {
        const done = await ctx.client.messageMove(String(at[1]), name, { uid: true });
        note(
          ctx,
          `create ${name}, move ${at[0]} UID ${at[1]} (model ${id}) into it: UID ${done ? done.uidMap?.get(at[1]) : '?'}`,
        );
      } finally {
        lock.release();
      }
    },
  ],
  [
    1,
    'burst',
    async (ctx) => {
      // Appends while another client marks and expunges them as they arrive.
      const path = pick(ctx, ['INBOX', ...(await folders(ctx))]);
      const uids: number[] = [];
      for (let i = 0; i < BURST; i++) {
        const id = ctx.nextId++;
        const done = await ctx.client.append(path, messageOf(id, false, 20_000));
        if (done && typeof done.uid === 'number') uids.push(done.uid);
        if (uids.length < 3 || ctx.random() < 0.5) continue;
        const lock = await ctx.client.getMailboxLock(path);
        try {
          await ctx.client.messageFlagsAdd(String(uids[uids.length - 2]), ['\\Seen'], { uid: true });
          if (ctx.random() < 0.4)
            await ctx.client.messageDelete(String(uids.splice(uids.length - 3, 1)[0]), { uid: true });
        } finally {
          lock.release();
        }
      }
      note(ctx, `burst of ${BURST} into ${path}, some marked and expunged as they came`);
    },
  ],
  [
    0.1,
    'thousands',
    async (ctx) => {
      const path = pick(ctx, await folders(ctx));
      const first = ctx.nextId;
      for (let i = 0; i < THOUSANDS; i++) await ctx.client.append(path, messageOf(ctx.nextId++));
      note(ctx, `${THOUSANDS} messages (models ${first}..${ctx.nextId - 1}) into ${path}`);
    },
  ],
  [
    0.1,
    'large message',
    async (ctx) => {
      const path = pick(ctx, ['INBOX', ...(await folders(ctx))]);
      const id = ctx.nextId++;
      const done = await ctx.client.append(path, messageOf(id, false, LARGE_MESSAGE_BYTES));
      note(ctx, `append model ${id} (66 MB) to ${path}: UID ${done ? done.uid : '?'}`);
    },
  ],
  [
    0.5,
    'gateway killed mid-re-read',
    async (ctx) => {
      // The folder with the most messages is renumbered, and the gateway dies while reading it again.
      let largest: [string, number] = ['INBOX', -1];
      for (const path of await folders(ctx)) {
        const status = await ctx.client.status(path, { messages: true });
        const count = (status && status.messages) || 0;
        if (count > largest[1]) largest = [path, count];
      }
      const path = largest[0];
      const status = await ctx.client.status(path, { uidValidity: true });
      const next = Number(status && status.uidValidity) + 1 + Math.floor(ctx.random() * 1000);
      await ctx.mail.doveadm(['mailbox', 'update', '--uid-validity', String(next), '-u', ctx.user, path]);
      await new Promise((r) => setTimeout(r, 500 + ctx.random() * 2_500));
      await ctx.killGateway();
      note(
        ctx,
        `uidvalidity of ${path} (${largest[1]} messages) set to ${next}, gateway killed while reading it again`,
      );
    },
  ],
];

async function copyOrMove(ctx: ModelContext, kind: 'copy' | 'move'): Promise<void> {
  const at = await someMessage(ctx);
  if (!at) return;
  const destination = kind === 'copy' && ctx.random() < 0.4 ? at[0] : pick(ctx, await folders(ctx));
  if (kind === 'move' && destination === at[0]) return;
  const id = await modelIdOf(ctx, at[0], at[1]);
  if (kind === 'copy' && id !== null) ctx.copied.add(id);
  const lock = await ctx.client.getMailboxLock(at[0]);
  try {
    const done =
      kind === 'copy'
        ? await ctx.client.messageCopy(String(at[1]), destination, { uid: true })
        : await ctx.client.messageMove(String(at[1]), destination, { uid: true });
    note(
      ctx,
      `${kind} ${at[0]} UID ${at[1]} (model ${id}) to ${destination}: UID ${done ? done.uidMap?.get(at[1]) : '?'}`,
    );
  } finally {
    lock.release();
  }
}

async function flag(ctx: ModelContext, add: boolean): Promise<void> {
  const at = await someMessage(ctx);
  if (!at) return;
  const which = ctx.random() < 0.5 ? '\\Seen' : '\\Flagged';
  const lock = await ctx.client.getMailboxLock(at[0]);
  try {
    if (add) await ctx.client.messageFlagsAdd(String(at[1]), [which], { uid: true });
    else await ctx.client.messageFlagsRemove(String(at[1]), [which], { uid: true });
    note(ctx, `${add ? 'add' : 'remove'} ${which} on ${at[0]} UID ${at[1]}`);
  } finally {
    lock.release();
  }
}

/** One random operation; returns its name. */
export async function randomOperation(ctx: ModelContext): Promise<string> {
  const allowed = OPERATIONS.filter(([, name]) => !ctx.leaveOut.has(name));
  let roll = ctx.random() * allowed.reduce((sum, [w]) => sum + w, 0);
  for (const [weight, name, run] of allowed) {
    roll -= weight;
    if (roll > 0) continue;
    await run(ctx);
    ctx.counts[name] = (ctx.counts[name] ?? 0) + 1;
    return name;
  }
  return 'none';
}
