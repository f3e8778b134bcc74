/**
 * The account's connection for the work that needs a folder of its own selected: the passes over
 * folders without an IDLE connection, the mailbox commands and the initial sync's pages, one at a
 * time (each a "turn"). It is opened by the first turn and closed after `idleMs` without one, so an
 * idle account holds only its IDLE connection (which also runs the poll's LIST-STATUS, see
 * gateway/session.ts). Between turns no folder is selected: servers answer STATUS and LIST-STATUS
 * for a selected folder from the session's stale view (Dovecot and Courier alike), and a selected
 * folder deleted by another client ends the connection (BYE).
 */
import type { ImapFlow } from 'imapflow';
import { Turns } from './async.ts';

export interface CommandConnectionHost {
  /** Connects and logs in (a connection whose unexpected close ends the session). */
  open(): Promise<ImapFlow>;
  /** Closes a connection on purpose, without ending the session. */
  drop(client: ImapFlow): void;
}

export class CommandConnection {
  #host: CommandConnectionHost;
  #idleMs: number;
  #client: ImapFlow | null = null;
  #turns = new Turns();
  /** Turns asked for and not over yet (the running one included). */
  #pending = 0;
  #idleTimer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(host: CommandConnectionHost, idleMs: number) {
    this.#host = host;
    this.#idleMs = idleMs;
  }

  /** The open connection, if any (null between an idle close and the next turn). */
  get client(): ImapFlow | null {
    return this.#client;
  }

  /** Runs `work` alone on the connection (opening it first if needed); afterwards no folder is selected. */
  turn<T>(work: (client: ImapFlow) => Promise<T>): Promise<T> {
    this.#pending++;
    clearTimeout(this.#idleTimer);
    return this.#turns.run(async () => {
      let client: ImapFlow | null = null;
      try {
        if (this.#closed) throw new Error('command connection closed');
        this.#client ??= await this.#host.open();
        client = this.#client;
        return await work(client);
      } finally {
        if (client) await deselect(client);
        if (--this.#pending === 0) this.#closeWhenIdle();
      }
    });
  }

  /** The session ended: the connection itself is closed with the session's others. */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#idleTimer);
    this.#client = null;
  }

  #closeWhenIdle(): void {
    if (!this.#client || this.#closed) return;
    this.#idleTimer = setTimeout(() => {
      const client = this.#client;
      if (this.#pending > 0 || !client) return;
      this.#client = null;
      this.#host.drop(client);
    }, this.#idleMs);
    this.#idleTimer.unref();
  }
}

/**
 * Leaves the selected folder without expunging anything: CLOSE expunges the \Deleted messages of a
 * folder selected read-write, so such a folder is re-opened read-only (EXAMINE) first.
 */
export async function deselect(client: ImapFlow): Promise<void> {
  const mailbox = client.mailbox;
  if (!mailbox || !client.usable) return;
  try {
    if (!mailbox.readOnly) await client.mailboxOpen(mailbox.path, { readOnly: true });
    await client.mailboxClose();
  } catch {
    // The connection broke: its close event ends the session.
  }
}
