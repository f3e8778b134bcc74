/**
 * The account's one IMAP connection for everything but IDLE: the folder-list poll, the passes over
 * folders without an IDLE connection, the mailbox commands and the initial sync's pages, one at a
 * time (each a "turn"). Between turns no folder is selected: servers answer STATUS and LIST-STATUS
 * for a selected folder from the session's stale view (Dovecot and Courier alike), and a selected
 * folder deleted by another client ends the connection (BYE).
 */
import type { ImapFlow } from 'imapflow';
import { Turns } from './async.ts';

export class CommandConnection {
  readonly client: ImapFlow;
  #turns = new Turns();

  constructor(client: ImapFlow) {
    this.client = client;
  }

  /** Runs `work` alone on the connection; afterwards the connection has no folder selected. */
  turn<T>(work: (client: ImapFlow) => Promise<T>): Promise<T> {
    return this.#turns.run(async () => {
      try {
        return await work(this.client);
      } finally {
        await deselect(this.client);
      }
    });
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
