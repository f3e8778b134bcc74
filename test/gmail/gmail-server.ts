/**
 * A Gmail IMAP emulation for tests (Gmail itself cannot be reached from here), built on
 * hoodiecrow-imap and completed to follow Google's documented IMAP extensions
 * (https://developers.google.com/gmail/imap/imap-extensions):
 *  - capability X-GM-EXT-1; FETCH items X-GM-MSGID, X-GM-THRID, X-GM-LABELS (64-bit decimals);
 *  - the `[Gmail]/` tree with SPECIAL-USE flags (`[Gmail]` itself \Noselect): All Mail \All,
 *    Sent Mail \Sent, Drafts \Drafts, Trash \Trash, Spam \Junk, Important \Important, Starred \Flagged;
 *  - labels are folders: one message shows up in INBOX, All Mail and every label folder it carries,
 *    each copy with that folder's own UID but the same X-GM-MSGID, X-GM-THRID and X-GM-LABELS
 *    (Spam and Trash are not in All Mail);
 *  - IDLE, UIDPLUS, MOVE, ID, NAMESPACE, UNSELECT, ENABLE. Plain TCP (encryption NONE).
 *
 * hoodiecrow's own X-GM-EXT-1 plugin neither advertises the capability nor answers X-GM-THRID, and
 * labels a message in All Mail "\All": `gmailExtensions` below wraps it and fixes those points.
 * Mail enters through `deliver()` (what Gmail's MX would do), or through APPEND like on Gmail.
 */
import { createRequire } from 'node:module';
import type { AddressInfo, Server, Socket } from 'node:net';

const require = createRequire(import.meta.url);
// CommonJS without types: the little of it used here is typed by `Hoodiecrow*` below.
const hoodiecrow = require('hoodiecrow-imap') as (options: object) => HoodiecrowServer;
const gmExt1 = require('hoodiecrow-imap/lib/plugins/x-gm-ext-1.js') as (server: HoodiecrowServer) => void;

interface HoodiecrowMessage {
  raw: string;
  flags: string[];
  internaldate: string | Date;
  uid?: number;
  'X-GM-MSGID'?: string;
  'X-GM-THRID'?: string;
  'X-GM-LABELS'?: string[];
}

interface HoodiecrowMailbox {
  path: string;
  messages: HoodiecrowMessage[];
  'special-use'?: string | string[];
}

type FetchHandler = (connection: unknown, message: HoodiecrowMessage) => unknown;
type MessageHandler = (connection: unknown, message: HoodiecrowMessage, mailbox: HoodiecrowMailbox) => void;

interface HoodiecrowServer {
  server: Server;
  fetchHandlers: Record<string, FetchHandler>;
  searchHandlers: Record<
    string,
    (connection: unknown, message: HoodiecrowMessage, sequence: number, value: string) => boolean
  >;
  messageHandlers: MessageHandler[];
  registerCapability(name: string): void;
  getMailbox(path: string): HoodiecrowMailbox | undefined;
  processMessage(message: HoodiecrowMessage, mailbox: HoodiecrowMailbox): void;
  notify(command: object, mailbox: HoodiecrowMailbox): void;
  listen(port: number, host: string, callback: () => void): void;
  close(callback: () => void): void;
  'HIGHESTX-GM-MSGID': { plus(n: number): { toString(): string } };
}

export const GMAIL_FOLDERS = {
  inbox: 'INBOX',
  all: '[Gmail]/All Mail',
  sent: '[Gmail]/Sent Mail',
  drafts: '[Gmail]/Drafts',
  trash: '[Gmail]/Trash',
  spam: '[Gmail]/Spam',
  important: '[Gmail]/Important',
  starred: '[Gmail]/Starred',
} as const;

/** Gmail's system labels (as X-GM-LABELS shows them) and the folder each one is. */
const SYSTEM_LABELS: Record<string, string> = {
  '\\Inbox': GMAIL_FOLDERS.inbox,
  '\\Sent': GMAIL_FOLDERS.sent,
  '\\Draft': GMAIL_FOLDERS.drafts,
  '\\Trash': GMAIL_FOLDERS.trash,
  '\\Spam': GMAIL_FOLDERS.spam,
  '\\Important': GMAIL_FOLDERS.important,
  '\\Starred': GMAIL_FOLDERS.starred,
};

/** The label a folder stands for (null for All Mail, which is every message, not a label). */
function labelOf(path: string): string | null {
  if (path === GMAIL_FOLDERS.all) return null;
  if (path.toUpperCase() === 'INBOX') return '\\Inbox';
  return Object.entries(SYSTEM_LABELS).find(([, folder]) => folder === path)?.[0] ?? path;
}

/** hoodiecrow's X-GM-EXT-1 plugin, completed: capability, X-GM-THRID, labels of the folder a message is added to. */
function gmailExtensions(server: HoodiecrowServer): void {
  gmExt1(server);
  server.registerCapability('X-GM-EXT-1');
  const nextMsgid = () => {
    server['HIGHESTX-GM-MSGID'] = server['HIGHESTX-GM-MSGID'].plus(1) as HoodiecrowServer['HIGHESTX-GM-MSGID'];
    return server['HIGHESTX-GM-MSGID'].toString();
  };
  // Replaces the plugin's handler, which labels an All Mail copy "\All" and a Starred copy "\Flagged".
  server.messageHandlers.splice(0, server.messageHandlers.length, (_connection, message, mailbox) => {
    message['X-GM-MSGID'] ??= nextMsgid();
    // A message that starts a conversation: Gmail uses its X-GM-MSGID as the thread id.
    message['X-GM-THRID'] ??= message['X-GM-MSGID'];
    message['X-GM-LABELS'] ??= [];
    const label = labelOf(mailbox.path);
    if (label && !message['X-GM-LABELS'].includes(label)) message['X-GM-LABELS'].push(label);
  });
  server.fetchHandlers['X-GM-THRID'] = (_connection, message) => ({ type: 'ATOM', value: message['X-GM-THRID'] });
  server.searchHandlers['X-GM-THRID'] = (_connection, message, _sequence, value) => message['X-GM-THRID'] === value;
}

export interface GmailDelivery {
  /** The RFC 822 source. */
  raw: string | Buffer;
  /** X-GM-LABELS: system labels (`\Inbox`, `\Important`, `\Starred`, `\Sent`, `\Draft`, `\Trash`, `\Spam`) and user labels (folder names). Default `\Inbox`. */
  labels?: string[];
  /** Join the conversation of a message delivered before (its X-GM-THRID). */
  threadOf?: GmailDelivered;
  flags?: string[];
  internalDate?: Date;
}

export interface GmailDelivered {
  msgid: string;
  thrid: string;
  /** UID of the message in each folder it was put in. */
  uids: Record<string, number>;
}

export interface GmailServer {
  host: '127.0.0.1';
  port: number;
  user: string;
  email: string;
  password: string;
  /** Put a message into the mailbox as Gmail's delivery would: one copy per label folder plus All Mail. */
  deliver(message: GmailDelivery): GmailDelivered;
  stop(): Promise<void>;
}

function folder(specialUse: string | null, extra: object = {}) {
  return { ...(specialUse && { 'special-use': specialUse }), messages: [], ...extra };
}

export async function startGmail(
  options: { email?: string; password?: string; labels?: string[] } = {},
): Promise<GmailServer> {
  const email = options.email ?? 'gmail.user@gmail.test';
  const password = options.password ?? 'app-password-1234';
  const userLabels = Object.fromEntries((options.labels ?? []).map((name) => [name, folder(null)]));
  const server = hoodiecrow({
    plugins: ['IDLE', 'ID', 'NAMESPACE', 'UNSELECT', 'ENABLE', 'UIDPLUS', 'MOVE', 'SPECIAL-USE', gmailExtensions],
    users: { [email]: { password } },
    storage: {
      INBOX: { messages: [] },
      '': {
        separator: '/',
        folders: {
          '[Gmail]': {
            flags: ['\\Noselect'],
            folders: {
              'All Mail': folder('\\All'),
              Drafts: folder('\\Drafts'),
              Important: folder('\\Important'),
              'Sent Mail': folder('\\Sent'),
              Spam: folder('\\Junk'),
              Starred: folder('\\Flagged'),
              Trash: folder('\\Trash'),
            },
          },
          ...userLabels,
        },
      },
    },
  });
  const sockets = new Set<Socket>();
  server.server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.server.address() as AddressInfo).port;

  const put = (path: string, message: HoodiecrowMessage): number => {
    const mailbox = server.getMailbox(path);
    if (!mailbox) throw new Error(`no folder ${path} in the Gmail emulation`);
    mailbox.messages.push(message);
    server.processMessage(message, mailbox);
    server.notify({ tag: '*', attributes: [mailbox.messages.length, { type: 'ATOM', value: 'EXISTS' }] }, mailbox);
    return message.uid!;
  };

  return {
    host: '127.0.0.1',
    port,
    user: email,
    email,
    password,
    deliver({ raw, labels = ['\\Inbox'], threadOf, flags = [], internalDate = new Date() }) {
      // Every copy shares one label list, as on Gmail labels belong to the message.
      const shared: string[] = [...labels];
      const source = Buffer.isBuffer(raw) ? raw.toString('binary') : Buffer.from(raw, 'utf8').toString('binary');
      const template = { raw: source, internaldate: internalDate, 'X-GM-LABELS': shared };
      const hidden = labels.includes('\\Trash') || labels.includes('\\Spam');
      const paths = [...new Set([...(hidden ? [] : [GMAIL_FOLDERS.all]), ...labels.map((l) => SYSTEM_LABELS[l] ?? l)])];
      // The first copy gets the X-GM-MSGID (and thread); the others carry the same.
      let ids: { msgid: string; thrid: string } | null = null;
      const uids: Record<string, number> = {};
      for (const path of paths) {
        const message: HoodiecrowMessage = {
          ...template,
          flags: [...flags, ...(labels.includes('\\Starred') ? ['\\Flagged'] : [])],
          ...(ids
            ? { 'X-GM-MSGID': ids.msgid, 'X-GM-THRID': ids.thrid }
            : threadOf
              ? { 'X-GM-THRID': threadOf.thrid }
              : {}),
        };
        uids[path] = put(path, message);
        ids ??= { msgid: message['X-GM-MSGID']!, thrid: message['X-GM-THRID']! };
      }
      return { ...ids!, uids };
    },
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const socket of sockets) socket.destroy();
      }),
  };
}
