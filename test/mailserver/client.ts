/**
 * Client-side helpers for the test mail server (see ./mailserver.ts).
 *
 * Everything here works from nothing but the JSON-serialisable
 * {@link MailServerInfo}, so tests running in vitest worker processes can use
 * a server started once by ./global-setup.ts:
 *
 *   const info = inject('mailserver');
 *   await deliver(info, { from: 'x@remote.test', to: 'alice@example.test', subject: 'hi', text: 'hello' });
 *   const imap = await openImap(info, 'alice');
 */
import fs from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';
import { ImapFlow, type ImapFlowOptions } from 'imapflow';
import nodemailer, { type Mail } from 'nodemailer';

export interface MailUser {
  /** IMAP/SMTP login name. The full `email` is accepted as login too. */
  user: string;
  email: string;
  password: string;
}

/** The JSON-serialisable description of a running test mail server. */
export interface MailServerInfo {
  host: '127.0.0.1';
  /** IMAPS (implicit TLS). */
  imapPort: number;
  /** IMAP with STARTTLS available; plaintext LOGIN allowed (loopback only). */
  imapPlainPort: number;
  /**
   * IMAPS whose every connection has a Dovecot process of its own (see mailserver.ts): for a client
   * whose IDLE notifications are compared with another connection's to the same folder.
   */
  imapSoloPort: number;
  /** SMTP submission: STARTTLS required, AUTH required. */
  smtpPort: number;
  /** SMTP submission with implicit TLS, AUTH required. */
  smtpsPort: number;
  /** Plain "incoming mail" SMTP: no AUTH, accepts mail for local users only. */
  mxPort: number;
  /** PEM file of the CA that signed the servers' certificate. */
  caFile: string;
  /** The mail domain of all users, e.g. `example.test`. */
  domain: string;
  users: MailUser[];
  /**
   * Catch-all mailbox: mail that authenticated users submit to NON-local
   * domains is not relayed anywhere but delivered here, so tests can check
   * "external" sends.
   */
  sink: MailUser;
  /** Temporary root holding configs, mail, queue and logs. */
  dir: string;
  /** Postfix log (used by {@link deliver} to wait for final delivery). */
  postfixLog: string;
  /** Dovecot log. */
  dovecotLog: string;
}

export interface DeliverOptions {
  from: string;
  to: string | string[];
  /** A complete RFC 822 message; sent verbatim (only the envelope comes from from/to). */
  raw?: string | Buffer;
  subject?: string;
  text?: string;
  html?: string;
  attachments?: Mail.Attachment[];
  headers?: Record<string, string>;
  messageId?: string;
  date?: Date | string;
  /**
   * Resolve only once Postfix has handed the message to Dovecot for every
   * recipient (status=sent in the Postfix log), so it is in the mailbox.
   * Default true. With false, resolves as soon as Postfix accepted (250 queued).
   */
  wait?: boolean;
  /** Limit for `wait` (default 15 s). */
  timeoutMs?: number;
}

export interface DeliverResult {
  /** Postfix queue id from "250 2.0.0 Ok: queued as ID". */
  queueId: string;
  /** The final SMTP response line. */
  response: string;
  messageId: string;
  accepted: string[];
}

const caCache = new Map<string, string>();

/** The CA certificate PEM (cached per file). */
export function readCa(info: Pick<MailServerInfo, 'caFile'>): string {
  let pem = caCache.get(info.caFile);
  if (pem === undefined) {
    pem = fs.readFileSync(info.caFile, 'utf8');
    caCache.set(info.caFile, pem);
  }
  return pem;
}

/**
 * Make TLS connections of this process that use the default CA list
 * (tls.connect, https, imapflow/nodemailer without `ca`, code under test)
 * trust the test CA too. NODE_EXTRA_CA_CERTS cannot do that for an already
 * running process (e.g. a vitest `threads` worker). Needs Node >= 22.19/24.5.
 */
export function trustTestCa(info: Pick<MailServerInfo, 'caFile'>): void {
  const ca = readCa(info);
  const current = tls.getCACertificates('default');
  if (!current.includes(ca)) tls.setDefaultCACertificates([...current, ca]);
}

/** Find a user by login name (`alice`) or email address, including the sink user. */
export function findUser(info: Pick<MailServerInfo, 'users' | 'sink'>, nameOrEmail: string): MailUser {
  const key = nameOrEmail.toLowerCase();
  const found = [...info.users, info.sink].find((u) => u.user === key || u.email === key);
  if (!found) throw new Error(`unknown test mail user ${nameOrEmail}`);
  return found;
}

/**
 * Deliver a message TO local users through Postfix's unauthenticated MX port,
 * as a remote mail server would. By default waits until it is in the mailbox.
 */
export async function deliver(info: MailServerInfo, opts: DeliverOptions): Promise<DeliverResult> {
  const to = Array.isArray(opts.to) ? opts.to : [opts.to];
  const transport = nodemailer.createTransport({
    host: info.host,
    port: info.mxPort,
    secure: false,
    ignoreTLS: true, // loopback; skip the STARTTLS handshake for speed
    name: 'mx-client.test',
  });
  // Remember where the Postfix log ends so we only scan what this delivery adds.
  const logOffset = opts.wait === false ? 0 : fileSize(info.postfixLog);
  try {
    const message: Mail.Options =
      opts.raw !== undefined
        ? { envelope: { from: opts.from, to }, raw: opts.raw }
        : {
            from: opts.from,
            to,
            subject: opts.subject ?? '(no subject)',
            text: opts.text,
            html: opts.html,
            attachments: opts.attachments,
            headers: opts.headers,
            messageId: opts.messageId,
            date: opts.date,
          };
    const sent = await transport.sendMail(message);
    const response = String(sent.response ?? '');
    const queueId = /queued as ([0-9A-Za-z]+)/.exec(response)?.[1];
    if (!queueId) throw new Error(`unexpected Postfix response: ${response}`);
    const result: DeliverResult = {
      queueId,
      response,
      messageId: String(sent.messageId ?? ''),
      accepted: (sent.accepted ?? []).map(String),
    };
    if (opts.wait !== false) {
      await waitForDelivery(info.postfixLog, queueId, { offset: logOffset, timeoutMs: opts.timeoutMs });
    }
    return result;
  } finally {
    transport.close();
  }
}

/**
 * Wait until Postfix is done with queue file `queueId` (qmgr logs "removed"),
 * reading the Postfix log from byte `offset`. Rejects as soon as a recipient
 * bounced. Temporary failures (status=deferred, e.g. while Dovecot is
 * stopped) keep waiting, since Postfix retries every second.
 */
export async function waitForDelivery(
  postfixLog: string,
  queueId: string,
  { offset = 0, timeoutMs = 15_000 }: { offset?: number | undefined; timeoutMs?: number | undefined } = {},
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const lines: string[] = [];
  let pos = offset;
  let partial = '';
  const tag = `: ${queueId}: `;
  for (;;) {
    const chunk = readFrom(postfixLog, pos);
    if (chunk.length > 0) {
      pos += chunk.length;
      const text = partial + chunk.toString('utf8');
      const parts = text.split('\n');
      partial = parts.pop() ?? '';
      for (const line of parts) if (line.includes(tag)) lines.push(line);
      const bounced = lines.find((l) => /status=bounced/.test(l));
      if (bounced) throw new Error(`delivery of ${queueId} bounced: ${bounced}`);
      if (lines.some((l) => l.endsWith(`${tag}removed`))) return;
    }
    if (Date.now() > deadline) {
      throw new Error(`delivery of ${queueId} not finished after ${timeoutMs} ms; log lines:\n${lines.join('\n')}`);
    }
    await new Promise((r) => setTimeout(r, 5));
  }
}

export interface OpenImapOptions extends Partial<ImapFlowOptions> {
  /** Use the STARTTLS/plain port instead of IMAPS (default false). */
  plainPort?: boolean;
  /** Use the solo port (IMAPS, a Dovecot process of its own: see MailServerInfo.imapSoloPort). */
  soloPort?: boolean;
  /** Override the password (e.g. to test a wrong one). */
  password?: string;
}

/** Create (not connect) an ImapFlow client for a user, TLS verified against the test CA. */
export function imapClient(info: MailServerInfo, user: string | MailUser, opts: OpenImapOptions = {}): ImapFlow {
  const u = typeof user === 'string' ? findUser(info, user) : user;
  const { plainPort, soloPort, password, tls, ...rest } = opts;
  return new ImapFlow({
    host: info.host,
    port: plainPort ? info.imapPlainPort : soloPort ? info.imapSoloPort : info.imapPort,
    secure: !plainPort,
    auth: { user: u.user, pass: password ?? u.password },
    tls: { ca: readCa(info), ...tls },
    logger: false,
    ...rest,
  });
}

/** Connect and log in an ImapFlow client for a user (`'alice'`, an email, or a MailUser). */
export async function openImap(
  info: MailServerInfo,
  user: string | MailUser,
  opts: OpenImapOptions = {},
): Promise<ImapFlow> {
  const client = imapClient(info, user, opts);
  await client.connect();
  return client;
}

/** UIDs in a folder whose Subject contains `subject`, after a NOOP (so the view is current). */
export async function uidsWithSubject(client: ImapFlow, folder: string, subject: string): Promise<number[]> {
  const lock = await client.getMailboxLock(folder);
  try {
    await client.noop();
    return ((await client.search({ header: { subject } }, { uid: true })) || []) as number[];
  } finally {
    lock.release();
  }
}

/** A message's flags as the server has them now (empty when it is gone). */
export async function flagsOf(client: ImapFlow, folder: string, uid: number): Promise<Set<string>> {
  const lock = await client.getMailboxLock(folder);
  try {
    await client.noop();
    const message = await client.fetchOne(String(uid), { flags: true }, { uid: true });
    return message ? (message.flags ?? new Set()) : new Set();
  } finally {
    lock.release();
  }
}

/**
 * A nodemailer transport that submits mail AS a user (AUTH) through the
 * submission port (STARTTLS) or, with implicitTls, the SMTPS port.
 */
export function submissionTransport(info: MailServerInfo, user: string | MailUser, { implicitTls = false } = {}) {
  const u = typeof user === 'string' ? findUser(info, user) : user;
  return nodemailer.createTransport({
    host: info.host,
    port: implicitTls ? info.smtpsPort : info.smtpPort,
    secure: implicitTls,
    requireTLS: !implicitTls,
    auth: { user: u.user, pass: u.password },
    tls: { ca: readCa(info) },
  });
}

function fileSize(file: string): number {
  try {
    return fs.statSync(file).size;
  } catch {
    return 0;
  }
}

function readFrom(file: string, pos: number): Buffer {
  let fd: number;
  try {
    fd = fs.openSync(file, 'r');
  } catch {
    return Buffer.alloc(0);
  }
  try {
    const size = fs.fstatSync(fd).size;
    if (size <= pos) return Buffer.alloc(0);
    const buf = Buffer.alloc(size - pos);
    const n = fs.readSync(fd, buf, 0, buf.length, pos);
    return buf.subarray(0, n);
  } finally {
    fs.closeSync(fd);
  }
}

/** Absolute path helper used by the server to lay out its temp dir. */
export function layout(dir: string) {
  return {
    caFile: path.join(dir, 'tls', 'ca.pem'),
    postfixLog: path.join(dir, 'postfix', 'postfix.log'),
    dovecotLog: path.join(dir, 'dovecot', 'dovecot.log'),
  };
}
