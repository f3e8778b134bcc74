/**
 * Commands on a leased account's mailbox (the Worker's `send` and `modify` requests). IMAP work
 * runs in a turn of the running session's command connection (between the sync's passes; no
 * connection of its own), or, while no session is up, on a connection opened for the command and
 * closed after it. SMTP: a connection opened for a send, reused by the sends that follow, and
 * closed after `smtpIdleMs` without one. The folders a command changed are synced at once.
 */
import type { Transporter } from 'nodemailer';
import type { ImapFlow } from 'imapflow';
import type {
  FolderAction,
  FolderActionResult,
  MailboxConfig,
  ModifyResult,
  ModifyStep,
  OutgoingMessage,
  OutgoingResult,
} from '../common/relay.ts';
import type { CommandConnection } from './command-connection.ts';
import type { SyncSettings } from './config.ts';
import { classifyError, GatewayError, isAuthFailure } from './errors.ts';
import { runFolderAction } from './folder-commands.ts';
import { featuresOf, imapOptions, openImap } from './imap.ts';
import { errorFields, type Logger } from './log.ts';
import { mailHostTarget } from './mail-hosts.ts';
import { DataPhaseWatch, loadMailComposer, loadNodemailer, smtpOptions } from './smtp.ts';
import { nextStamp } from './stamps.ts';

/** What the commands need of the account's sync (gateway/account-sync.ts). */
export interface SyncLink {
  /** The running session's command connection; null while no session is up. */
  commandConnection(): CommandConnection | null;
  /** The gateway changed these folders: sync them now, without waiting for the poll. */
  changed(paths: string[]): void;
}

export class MailboxCommands {
  #config: MailboxConfig;
  #settings: SyncSettings;
  #log: Logger;
  #sync: SyncLink;
  /** The SMTP connection of the current run of sends (login and TLS once, not per message). */
  #transport: Transporter | null = null;
  #dataPhase = new DataPhaseWatch();
  /** Sends go one at a time, so that the DATA phase watched is this send's. */
  #smtpTurn: Promise<void> = Promise.resolve();
  #sending = 0;
  #idleTimer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(config: MailboxConfig, settings: SyncSettings, log: Logger, sync: SyncLink) {
    this.#config = config;
    this.#settings = settings;
    this.#log = log;
    this.#sync = sync;
  }

  close(): void {
    this.#closed = true;
    this.#closeSmtp();
  }

  #closeSmtp(): void {
    clearTimeout(this.#idleTimer);
    this.#transport?.close();
    this.#transport = null;
  }

  /** IMAP work; a failure of the server becomes a GatewayError the Worker maps onto the API. */
  async #withImap<T>(work: (client: ImapFlow) => Promise<T>): Promise<T> {
    if (this.#closed) throw new GatewayError('provider_error', 'the account is no longer held by this gateway');
    try {
      const shared = this.#sync.commandConnection();
      if (shared) return await shared.turn(work);
      return await this.#onOwnConnection(work);
    } catch (err) {
      if (err instanceof GatewayError) throw err;
      const { imap } = this.#config;
      // A NO/BAD answer is the server refusing the command; anything else is the connection failing.
      const response = (err as { serverResponseCode?: string; responseStatus?: string }).responseStatus;
      if (response === 'NO' || response === 'BAD') {
        throw new GatewayError(
          'provider_rejected',
          `IMAP server refused the command: ${(err as Error).message.slice(0, 200)}`,
        );
      }
      throw classifyError(err, 'IMAP', imap.host, imap.port);
    }
  }

  /** While no session is up (it is reconnecting): a connection for this command alone. */
  async #onOwnConnection<T>(work: (client: ImapFlow) => Promise<T>): Promise<T> {
    const client = await openImap(
      imapOptions(this.#config.imap, { timeoutMs: this.#settings.connectTimeoutMs }, { disableAutoIdle: true }),
    );
    try {
      return await work(client);
    } finally {
      await client.logout().catch(() => client.close());
    }
  }

  /** Compose with nodemailer, send over SMTP (mode `send`), then APPEND the very same bytes. */
  async send(mode: 'send' | 'draft', message: OutgoingMessage, appendTo: string | null): Promise<OutgoingResult> {
    const raw = await buildMessage(message, { keepBcc: mode === 'draft' });
    if (mode === 'send') await this.#smtp(message, raw);
    const result: OutgoingResult = { message_id: message.message_id };
    if (!appendTo) return result;
    try {
      return await this.#withImap(async (client) => {
        // Gmail files a copy of every message sent through its SMTP itself.
        if (mode === 'send' && featuresOf(client).gmail) return result;
        const flags = mode === 'draft' ? ['\\Draft', '\\Seen'] : ['\\Seen'];
        const appended = await client.append(appendTo, raw, flags, new Date());
        if (!appended)
          throw new GatewayError('provider_rejected', `IMAP server refused to store the message in ${appendTo}`);
        return result;
      });
    } catch (err) {
      if (mode === 'draft') throw err;
      // The message is out: answering with an error would make clients send it again.
      this.#log.warn('sent, but the Sent copy could not be stored', { path: appendTo, ...errorFields(err) });
      return result;
    } finally {
      // The Sent copy or the draft is synced at once (Gmail files its own copy: seen there or at the next poll).
      this.#sync.changed([appendTo]);
    }
  }

  async #smtp(message: OutgoingMessage, raw: Buffer): Promise<void> {
    const previous = this.#smtpTurn;
    let done = () => {};
    this.#smtpTurn = new Promise<void>((resolve) => {
      done = resolve;
    });
    this.#sending++;
    try {
      await previous;
      await this.#smtpSend(message, raw);
    } finally {
      done();
      this.#sending--;
      if (this.#sending === 0 && this.#transport) {
        clearTimeout(this.#idleTimer);
        this.#idleTimer = setTimeout(() => {
          if (this.#sending === 0) this.#closeSmtp();
        }, this.#settings.smtpIdleMs);
        this.#idleTimer.unref();
      }
    }
  }

  async #smtpSend(message: OutgoingMessage, raw: Buffer): Promise<void> {
    const { smtp } = this.#config;
    clearTimeout(this.#idleTimer);
    const nodemailer = await loadNodemailer();
    if (!this.#transport) {
      // The host is judged when the transport is made; its connections all go to that address.
      const target = await mailHostTarget(smtp.host).catch((err: unknown) => {
        throw classifyError(err, 'SMTP', smtp.host, smtp.port);
      });
      this.#dataPhase = new DataPhaseWatch();
      this.#transport = nodemailer.createTransport({
        ...smtpOptions(smtp, target, this.#settings.connectTimeoutMs),
        pool: true,
        maxConnections: 1,
        transactionLog: true,
        logger: this.#dataPhase.logger,
      });
    }
    const transport = this.#transport;
    const dataPhase = this.#dataPhase;
    const recipients = [...message.to, ...message.cc, ...message.bcc].map((a) => a.address);
    dataPhase.begun = false;
    try {
      await transport.sendMail({ envelope: { from: message.from.address, to: recipients }, raw });
    } catch (err) {
      // Start the next send on a fresh connection.
      if (this.#transport === transport) this.#closeSmtp();
      else transport.close();
      const failure = classifySendError(err, smtp.host, smtp.port);
      // A reply code is the server's final word; a failure before DATA (connect, TLS, login, MAIL,
      // RCPT) handed nothing over; a link lost from DATA on may have delivered the message.
      failure.mayHaveSent = typeof (err as { responseCode?: unknown }).responseCode !== 'number' && dataPhase.begun;
      throw failure;
    }
  }

  /**
   * Runs the steps in order; for copies and moves, the destination UID (COPYUID, else found by
   * Message-ID). Each step first makes sure it addresses the message the Worker means: the folder's
   * UIDVALIDITY is the one the step names, and the UID is there (after a NOOP, so mail that arrived
   * since this connection's last command is seen too).
   */
  async modify(steps: ModifyStep[]): Promise<ModifyResult> {
    const touched = steps.flatMap((step) =>
      step.type === 'copy' || step.type === 'move' ? [step.path, step.destination] : [step.path],
    );
    try {
      return await this.#modify(steps);
    } finally {
      this.#sync.changed([...new Set(touched)]);
    }
  }

  /** Create, rename or delete a folder (gateway/folder-commands.ts); the next poll's listing reports it. */
  async folder(action: FolderAction): Promise<FolderActionResult> {
    const result = await this.#withImap((client) => runFolderAction(client, action));
    return { ...result, listed_after: nextStamp() };
  }

  async #modify(steps: ModifyStep[]): Promise<ModifyResult> {
    return this.#withImap(async (client) => {
      const uids: (number | null)[] = [];
      for (const step of steps) {
        const lock = await client.getMailboxLock(step.path);
        let messageId: string | null;
        try {
          messageId = await locate(client, step);
          uids.push(await runStep(client, step));
        } finally {
          lock.release();
        }
        const last = uids.length - 1;
        if ((step.type === 'copy' || step.type === 'move') && uids[last] === null && messageId)
          uids[last] = await findByMessageId(client, step.destination, messageId);
      }
      return { uids };
    });
  }
}

/** Checks UIDVALIDITY and presence of the step's message in the selected folder; returns its Message-ID. */
async function locate(client: ImapFlow, step: ModifyStep): Promise<string | null> {
  await client.noop();
  const uidValidity = Number(client.mailbox ? client.mailbox.uidValidity : 0);
  if (uidValidity !== step.uidvalidity)
    throw new GatewayError('not_found', `${step.path} was renumbered by the server (UIDVALIDITY changed)`);
  const found = await client.fetchOne(String(step.uid), { uid: true, envelope: true }, { uid: true });
  if (!found || found.uid !== step.uid) throw new GatewayError('not_found', `the message is no longer in ${step.path}`);
  return found.envelope?.messageId ?? null;
}

async function runStep(client: ImapFlow, step: ModifyStep): Promise<number | null> {
  const range = String(step.uid);
  switch (step.type) {
    case 'flags':
      if (step.add.length) await client.messageFlagsAdd(range, step.add, { uid: true });
      if (step.remove.length) await client.messageFlagsRemove(range, step.remove, { uid: true });
      return null;
    case 'copy':
    case 'move': {
      const done =
        step.type === 'move'
          ? await client.messageMove(range, step.destination, { uid: true })
          : await client.messageCopy(range, step.destination, { uid: true });
      if (!done) throw new GatewayError('not_found', `the message is no longer in ${step.path}`);
      return done.uidMap?.get(step.uid) ?? null;
    }
    case 'delete':
      await deleteOne(client, step.uid);
      return null;
  }
}

/**
 * Removes one message. With UIDPLUS, UID EXPUNGE touches nothing else; without it, a plain EXPUNGE
 * would also remove every other \Deleted message of the folder, so it runs only when no other
 * message is marked, and otherwise the message stays marked \Deleted (hidden by mail clients).
 */
async function deleteOne(client: ImapFlow, uid: number): Promise<void> {
  if (client.capabilities.has('UIDPLUS')) {
    await client.messageDelete(String(uid), { uid: true });
    return;
  }
  await client.messageFlagsAdd(String(uid), ['\\Deleted'], { uid: true });
  const marked = (await client.search({ deleted: true }, { uid: true })) || [];
  // Only ours is marked: imapflow's delete (STORE \Deleted, then EXPUNGE) removes just this one.
  if (marked.length === 1 && marked[0] === uid) await client.messageDelete(String(uid), { uid: true });
}

/** Without COPYUID: the copy's UID in the destination, the newest message there with that Message-ID. */
async function findByMessageId(client: ImapFlow, path: string, messageId: string): Promise<number | null> {
  const lock = await client.getMailboxLock(path, { readOnly: true });
  try {
    const found = (await client.search({ header: { 'message-id': messageId } }, { uid: true })) || [];
    return found.length ? Math.max(...found) : null;
  } finally {
    lock.release();
  }
}

/** The RFC 822 bytes of a message (Bcc kept only for drafts, which are not sent). */
export async function buildMessage(message: OutgoingMessage, { keepBcc }: { keepBcc: boolean }): Promise<Buffer> {
  const MailComposer = await loadMailComposer();
  const node = new MailComposer({
    messageId: message.message_id,
    date: new Date(),
    from: message.from,
    to: message.to,
    cc: message.cc,
    bcc: message.bcc,
    subject: message.subject,
    html: message.html || undefined,
    text: message.text,
    inReplyTo: message.in_reply_to ?? undefined,
    references: message.references.length ? message.references : undefined,
    headers: message.headers.map((h) => ({ key: h.name, value: h.value })),
    attachments: message.attachments.map((a) => ({
      filename: a.filename,
      content: Buffer.from(a.content, 'base64'),
      ...(a.content_type ? { contentType: a.content_type } : {}),
      ...(a.cid ? { cid: a.cid } : {}),
    })),
  }).compile();
  node.keepBcc = keepBcc;
  return node.build();
}

/** SMTP failures: login refused → invalid_credentials; a 5xx answer → provider_rejected; the rest → provider_error. */
function classifySendError(err: unknown, host: string, port: number): GatewayError {
  if (isAuthFailure(err))
    return new GatewayError('invalid_credentials', 'SMTP login failed: the server refused the user name or password');
  const code = (err as { responseCode?: unknown }).responseCode;
  if (typeof code === 'number' && code >= 500) {
    const response = String((err as { response?: unknown }).response ?? '')
      .replace(/[\r\n]+/g, ' ')
      .slice(0, 300);
    return new GatewayError('provider_rejected', `SMTP server refused the message: ${response || code}`);
  }
  return classifyError(err, 'SMTP', host, port);
}
