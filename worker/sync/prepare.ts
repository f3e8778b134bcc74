/**
 * Parsing new mail before the account's object takes the change. The changes endpoint runs in a
 * stateless request: it decodes and parses every source the change carries (and derives each
 * message's base identity) there, so the object, which applies one change at a time, only decides
 * and writes. A change waiting for its turn is parsed while the change before it is applied.
 *
 * Parsing is a pure function of the source, so where it runs changes nothing the object decides.
 * Staged sources (common/relay.ts `MessageIn.staged`) are left to the object, which reads them from
 * R2 itself: they would make the RPC as large as the message. So is anything that fails here.
 */
import type { Change, MessageIn } from '../../common/relay.ts';
import { parseMessage } from '../ingest/parse.ts';
import type { ParsedMessage } from '../ingest/types.ts';
import { fromBase64 } from '../lib/crypto.ts';
import { identityOf } from './identity.ts';

export interface PreparedMessage {
  raw: Uint8Array;
  mail: ParsedMessage;
  /** The base identity (sync/identity.ts). */
  base: string;
}

/** Per change, per message (same positions as the changes): what was prepared, or null. */
export type Prepared = (PreparedMessage | null)[][];

/**
 * What a parse of a source's head lists (sync/sources.ts): its last attachment may end past the
 * head, so it is left out of the list (the raw source still has it).
 */
function partOfHead(mail: ParsedMessage): ParsedMessage {
  if (!mail.attachments.length) return mail;
  return { ...mail, attachments: mail.attachments.slice(0, -1), has_attachments: true };
}

/** Parses a source; `cut`: only its head was read (sync/sources.ts). */
export async function prepareMessage(message: MessageIn, raw: Uint8Array, cut = false): Promise<PreparedMessage> {
  const parsed = await parseMessage(raw);
  const mail = cut ? partOfHead(parsed) : parsed;
  return { raw, mail, base: await identityOf(message, mail) };
}

/**
 * The changes with the sources that were prepared left out (they travel once, as bytes, in
 * `prepared`), and what was prepared.
 */
export async function prepareChanges(changes: Change[]): Promise<{ changes: Change[]; prepared: Prepared }> {
  const start = performance.now();
  const prepared: Prepared = [];
  const out: Change[] = [];
  for (const change of changes) {
    if (change.type !== 'messages') {
      prepared.push([]);
      out.push(change);
      continue;
    }
    const ready = await Promise.all(
      change.messages.map(async (m) => {
        if (m.staged) return null;
        try {
          return await prepareMessage(m, fromBase64(m.raw));
        } catch {
          return null;
        }
      }),
    );
    prepared.push(ready);
    out.push({ ...change, messages: change.messages.map((m, i) => (ready[i] ? { ...m, raw: '' } : m)) });
  }
  const messages = prepared.reduce((n, p) => n + p.length, 0);
  // Beside the object's `sync stats` line: what `npm run bench sync` sums as parsing.
  if (messages)
    console.log(
      `sync prepare ${JSON.stringify({ messages, parseMs: Math.round((performance.now() - start) * 10) / 10 })}`,
    );
  return { changes: out, prepared };
}

/** The object's side: each message object of the changes it received, with what was prepared for it. */
export function preparedByMessage(
  changes: Change[],
  prepared: Prepared | undefined,
): WeakMap<MessageIn, PreparedMessage> {
  const byMessage = new WeakMap<MessageIn, PreparedMessage>();
  if (!prepared) return byMessage;
  changes.forEach((change, i) => {
    if (change.type !== 'messages') return;
    change.messages.forEach((m, j) => {
      const ready = prepared[i]?.[j];
      if (ready) byMessage.set(m, ready);
    });
  });
  return byMessage;
}
