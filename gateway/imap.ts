/** Everything about opening IMAP connections and reading the folder list, shared by verify and sync. */
import { ImapFlow, type ImapFlowOptions, type ListResponse, type StatusObject } from 'imapflow';
import { createSecureContext, type SecureContext } from 'node:tls';
import type { FolderInfo, ServerConfig } from '../common/relay.ts';
import { DEFAULT_MAX_MESSAGE_BYTES } from '../common/relay-limits.ts';
import { trackImapConnection } from './metrics.ts';
import { mailHostTarget } from './mail-hosts.ts';

let defaultContext: SecureContext | undefined;

/**
 * One TLS context (Node's defaults: system CAs plus NODE_EXTRA_CA_CERTS, TLS 1.2+) for every
 * connection of the process (IMAP, and SMTP's verify): without it each connection builds its own, about 25 KB apiece.
 */
export function sharedSecureContext(): SecureContext {
  defaultContext ??= createSecureContext();
  return defaultContext;
}

export function imapOptions(
  server: ServerConfig,
  {
    timeoutMs,
    qresync = true,
    condstore = true,
    maxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES,
  }: { timeoutMs: number; qresync?: boolean; condstore?: boolean; maxMessageBytes?: number },
  extra: Partial<ImapFlowOptions> = {},
): ImapFlowOptions {
  const extensions = { qresync, condstore };
  return {
    host: server.host,
    port: server.port,
    secure: server.encryption === 'SSL',
    // STARTTLS: required (never fall back to clear text); NONE: never upgrade.
    doSTARTTLS: server.encryption === 'SSL' ? undefined : server.encryption === 'STARTTLS',
    auth: { user: server.user, pass: server.password },
    logger: false,
    connectionTimeout: timeoutMs,
    greetingTimeout: timeoutMs,
    // QRESYNC when the server has it: expunges then carry UIDs (VANISHED), also while IDLE-ing.
    qresync: extensions.qresync,
    // imapflow ENABLEs CONDSTORE (and UTF8=ACCEPT) unless told not to.
    disableAutoEnable: !extensions.condstore,
    tls: { secureContext: sharedSecureContext() },
    // COMPRESS=DEFLATE (Gmail, Dovecot with its zlib plugin) keeps a zlib deflate and inflate state
    // per connection, about 300 KB: more than the whole connection without it. An idle account's
    // traffic is a few status lines, not worth that.
    disableCompression: true,
    // A server's literal (a message source) is never taken above the gateway's message limit: a
    // larger one ends the connection instead of filling the gateway's memory. The pass reads sizes
    // first and fetches only the head of a larger message (gateway/fetch-new.ts).
    maxLiteralSize: maxMessageBytes,
    maxResponseSize: maxMessageBytes + 1024 * 1024,
    ...extra,
  };
}

/**
 * Connects to the address the host was judged by (mail-hosts.ts) and logs in; closes the socket if
 * that fails half-way.
 */
export async function openImap(options: ImapFlowOptions): Promise<ImapFlow> {
  const { address, servername } = await mailHostTarget(options.host ?? '');
  const client = new ImapFlow({ ...options, host: address, ...(servername ? { servername } : {}) });
  // Errors also arrive as events; without a listener an 'error' event would crash the process.
  client.on('error', () => undefined);
  try {
    await client.connect();
  } catch (err) {
    client.close();
    throw err;
  }
  trackImapConnection(client);
  return client;
}

export interface ServerFeatures {
  condstore: boolean;
  qresync: boolean;
  gmail: boolean;
  /** MOVE (RFC 6851): without it every move, ours or another client's, is a COPY and then an EXPUNGE. */
  move: boolean;
}

export function featuresOf(client: ImapFlow): ServerFeatures {
  return {
    condstore: client.enabled.has('CONDSTORE'),
    qresync: client.enabled.has('QRESYNC'),
    gmail: client.capabilities.has('X-GM-EXT-1'),
    move: client.capabilities.has('MOVE'),
  };
}

export const STATUS_QUERY = { uidValidity: true, uidNext: true, messages: true, highestModseq: true } as const;

export function isSelectable(folder: Pick<FolderInfo, 'flags'>): boolean {
  return !folder.flags.some((f) => f.toLowerCase() === '\\noselect' || f.toLowerCase() === '\\nonexistent');
}

/**
 * \Marked and \Unmarked (RFC 3501) say whether mail came since the folder was last selected: they
 * come and go with new mail, so they are no property of the folder (a listing that differed only by
 * them would be reported to the Worker, and stored, for nothing).
 */
const TRANSIENT_ATTRIBUTES = new Set(['\\marked', '\\unmarked']);

export function toFolderInfo(entry: ListResponse): FolderInfo {
  const status: Partial<StatusObject> = entry.status ?? {};
  return {
    path: entry.path,
    delimiter: entry.delimiter || null,
    flags: [...entry.flags].filter((f) => !TRANSIENT_ATTRIBUTES.has(f.toLowerCase())),
    // imapflow knows RFC 6154's flags; RFC 8457's \Important (Gmail's "[Gmail]/Important") is read here.
    special_use: entry.specialUse ?? (entry.flags.has('\\Important') ? '\\Important' : null),
    uidvalidity: Number(status.uidValidity ?? 0),
    uidnext: status.uidNext ?? 0,
    highest_modseq: status.highestModseq !== undefined ? String(status.highestModseq) : null,
    total: status.messages ?? 0,
  };
}

/** LIST (SPECIAL-USE) plus STATUS of every folder: one round trip where LIST-STATUS exists. */
export async function listFolders(client: ImapFlow): Promise<FolderInfo[]> {
  const entries = await client.list({ statusQuery: { ...STATUS_QUERY } });
  return entries.map(toFolderInfo);
}
