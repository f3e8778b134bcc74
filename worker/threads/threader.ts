/**
 * Conversation threading of synced mail.
 *
 * - Gmail's X-GM-THRID where present (a derived, stable `thr_` id).
 * - Otherwise JWZ-style, through thread keys: every Message-ID an email names (its own, In-Reply-To,
 *   References) is a row in `thread_keys`, and an email joins the thread of any email sharing a key.
 *   That tolerates missing parents: a reply that arrives before its parent, or siblings that only
 *   share an ancestor that never arrived. When one email links two existing threads they merge: the
 *   later thread's emails (by their first date) take the earlier thread's id.
 * - Only an email with neither In-Reply-To nor References, whose subject has a reply-style prefix
 *   ("Re: x", "AW: x"), falls back to the subject: it joins the latest conversation of the account's
 *   last 30 days whose normalized subject is the same.
 *
 * One Threader serves one change: the emails it threads are not in D1 until the change commits, so
 * their keys are also remembered here.
 */
import type { ParsedMessage } from '../ingest/types.ts';
import { derivedId, newId } from '../lib/ids.ts';
import { isoNow } from '../lib/time.ts';
import { placeholders } from '../lib/sql.ts';

export const SUBJECT_WINDOW_MS = 30 * 24 * 3600 * 1000;
/** The nearest ancestors are enough to find a conversation; this keeps rows and parameters bounded. */
const MAX_REFERENCES = 20;
/** Reply and forward prefixes in common languages, repeated or numbered ("Re: AW: x", "Re[2]: x"). */
const REPLY_PREFIXES = /^(?:\s*(?:re|fwd?|aw|sv|wg|vs|antw|tr|rif|odp)\s*(?:\[\d+\]|\(\d+\))?\s*[:：])+/i;
const SUBJECT_KEY = 'subject:';

export interface ThreadedMessage {
  message_id: string | null;
  in_reply_to: string | null;
  references: string[];
  subject: string;
  date_ms: number;
  gm_thrid: string | null;
}

export function threadedMessage(
  mail: Pick<ParsedMessage, 'message_id' | 'in_reply_to' | 'references' | 'subject'>,
  dateMs: number,
  gmThrid: string | undefined,
): ThreadedMessage {
  const { message_id, in_reply_to, references, subject } = mail;
  return { message_id, in_reply_to, references, subject, date_ms: dateMs, gm_thrid: gmThrid ?? null };
}

/** The subject without reply/forward prefixes, case-folded, and whether it had any. */
export function normalizeSubject(subject: string): { base: string; isReply: boolean } {
  const prefix = REPLY_PREFIXES.exec(subject)?.[0] ?? '';
  return { base: subject.slice(prefix.length).trim().replace(/\s+/g, ' ').toLowerCase(), isReply: prefix !== '' };
}

/** The Message-IDs an email names. */
function messageKeys(m: ThreadedMessage): string[] {
  const keys = [m.message_id, m.in_reply_to, ...m.references.slice(-MAX_REFERENCES)].filter((k): k is string => !!k);
  return [...new Set(keys)];
}

interface Thread {
  threadId: string;
  /** Date of the thread's first email: the earlier of two merging threads keeps its id. */
  firstMs: number;
}

export class Threader {
  private readonly db: D1Database;
  private readonly accountId: string;
  /** Keys of the emails threaded by this instance (not yet in D1), with their thread and date. */
  private readonly pending = new Map<string, { threadId: string; dateMs: number }>();
  private readonly pendingFirst = new Map<string, number>();

  constructor(db: D1Database, accountId: string) {
    this.db = db;
    this.accountId = accountId;
  }

  /**
   * The thread of a new email, the statements that merge threads it links (run before its insert),
   * and the ids of the threads merged into it (their emails changed thread_id).
   */
  async assign(m: ThreadedMessage): Promise<{ threadId: string; statements: D1PreparedStatement[]; merged: string[] }> {
    if (m.gm_thrid)
      return { threadId: await derivedId('thread', `${this.accountId}:gm:${m.gm_thrid}`), statements: [], merged: [] };

    const threads = await this.threadsNaming(messageKeys(m));
    if (threads.length === 0) {
      const { base, isReply } = normalizeSubject(m.subject);
      const bySubject =
        !m.in_reply_to && m.references.length === 0 && isReply && base
          ? await this.latestBySubject(base, m.date_ms)
          : null;
      return { threadId: bySubject ?? newId('thread'), statements: [], merged: [] };
    }
    const [winner, ...later] = threads.sort((a, b) => a.firstMs - b.firstMs || a.threadId.localeCompare(b.threadId));
    if (later.length === 0) return { threadId: winner!.threadId, statements: [], merged: [] };
    return { threadId: winner!.threadId, statements: this.merge(winner!, later), merged: later.map((t) => t.threadId) };
  }

  /** Statements recording a new email's keys (run after its insert). */
  record(emailId: string, threadId: string, m: ThreadedMessage): D1PreparedStatement[] {
    if (m.gm_thrid) return [];
    const { base } = normalizeSubject(m.subject);
    const keys = [...messageKeys(m), ...(base ? [SUBJECT_KEY + base] : [])];
    for (const key of keys) {
      const known = this.pending.get(key);
      if (!known || known.dateMs <= m.date_ms) this.pending.set(key, { threadId, dateMs: m.date_ms });
    }
    this.pendingFirst.set(threadId, Math.min(this.pendingFirst.get(threadId) ?? Infinity, m.date_ms));
    return keys.map((key) =>
      this.db
        .prepare('INSERT OR IGNORE INTO thread_keys (account_id, key, email_id) VALUES (?, ?, ?)')
        .bind(this.accountId, key, emailId),
    );
  }

  /** Threads (stored or pending) holding an email that names one of `keys`, with their first dates. */
  private async threadsNaming(keys: string[]): Promise<Thread[]> {
    const found = new Map<string, number>();
    for (const key of keys) {
      const pending = this.pending.get(key);
      if (pending) found.set(pending.threadId, this.pendingFirst.get(pending.threadId) ?? pending.dateMs);
    }
    if (keys.length) {
      const { results } = await this.db
        .prepare(
          `SELECT thread_id, MIN(date_ms) AS first_ms FROM emails
           WHERE thread_id IN (SELECT e.thread_id FROM thread_keys k JOIN emails e ON e.id = k.email_id
                               WHERE k.account_id = ? AND k.key IN (${placeholders(keys.length)}))
           GROUP BY thread_id`,
        )
        .bind(this.accountId, ...keys)
        .all<{ thread_id: string; first_ms: number }>();
      for (const r of results) found.set(r.thread_id, Math.min(found.get(r.thread_id) ?? Infinity, r.first_ms));
    }
    return [...found].map(([threadId, firstMs]) => ({ threadId, firstMs }));
  }

  /** The latest conversation of the 30 days before `dateMs` with this normalized subject. */
  private async latestBySubject(base: string, dateMs: number): Promise<string | null> {
    const key = SUBJECT_KEY + base;
    const pending = this.pending.get(key);
    const stored = await this.db
      .prepare(
        `SELECT e.thread_id, e.date_ms FROM thread_keys k JOIN emails e ON e.id = k.email_id
         WHERE k.account_id = ? AND k.key = ? AND e.date_ms >= ? ORDER BY e.date_ms DESC LIMIT 1`,
      )
      .bind(this.accountId, key, dateMs - SUBJECT_WINDOW_MS)
      .first<{ thread_id: string; date_ms: number }>();
    const candidates = [
      ...(stored ? [{ threadId: stored.thread_id, dateMs: stored.date_ms }] : []),
      ...(pending && pending.dateMs >= dateMs - SUBJECT_WINDOW_MS ? [pending] : []),
    ].sort((a, b) => b.dateMs - a.dateMs);
    return candidates[0]?.threadId ?? null;
  }

  /** Later threads become `winner`: stored emails by statement, pending ones here. */
  private merge(winner: Thread, later: Thread[]): D1PreparedStatement[] {
    const ids = later.map((t) => t.threadId);
    for (const entry of this.pending.values()) if (ids.includes(entry.threadId)) entry.threadId = winner.threadId;
    for (const id of ids) this.pendingFirst.delete(id);
    this.pendingFirst.set(winner.threadId, Math.min(winner.firstMs, ...later.map((t) => t.firstMs)));
    return [
      this.db
        .prepare(
          `UPDATE emails SET thread_id = ?, updated_at = ? WHERE account_id = ? AND thread_id IN (${placeholders(ids.length)})`,
        )
        .bind(winner.threadId, isoNow(), this.accountId, ...ids),
    ];
  }
}
