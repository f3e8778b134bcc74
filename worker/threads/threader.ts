/**
 * Conversation threading of synced mail.
 *
 * - Gmail's X-GM-THRID where present (a derived, stable `thr_` id).
 * - Otherwise JWZ-style, through thread keys: every Message-ID an email names (its own, In-Reply-To,
 *   References) is a row in `thread_key_numbers` (a hash of the account and the key, with the
 *   email's number; emails stored before numbers have theirs in `thread_key_hashes` by email id, and
 *   before hashes in `thread_keys`, as text), and an email joins the thread of any email
 *   sharing a key.
 *   That tolerates missing parents: a reply that arrives before its parent, or siblings that only
 *   share an ancestor that never arrived. When one email links two existing threads they merge: the
 *   later thread's emails (by their first date) take the earlier thread's id.
 * - Only an email with neither In-Reply-To nor References, whose subject has a reply-style prefix
 *   ("Re: x", "AW: x"), falls back to the subject: it joins the latest conversation of the account's
 *   last 30 days whose normalized subject is the same.
 *
 * One Threader serves one change: the emails it threads are not in D1 until the change commits, so
 * their keys are also remembered here. `prefetch` reads what D1 knows of every key of the change's
 * messages in two queries; `assign` then works from memory (threads merged meanwhile resolved to
 * the thread they became).
 */
import type { ParsedMessage } from '../ingest/types.ts';
import { derivedId, newId } from '../lib/ids.ts';
import { isoNow } from '../lib/time.ts';
import { jsonChunks, placeholders } from '../lib/sql.ts';
import { sha256Hex } from '../../common/crypto.ts';

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

/** A key as `thread_key_numbers` holds it (hex): the first 8 bytes of SHA-256 of the account and the key. */
async function keyHash(accountId: string, key: string): Promise<string> {
  return (await sha256Hex(`${accountId}\n${key}`)).slice(0, 16);
}

/**
 * The stored emails naming each key (JSON [key, hash] pairs, ?2) with their thread: by hash, and by
 * text in the rows written before hashes (?1: the account).
 */
const EMAILS_NAMING = `SELECT json_extract(j.value, '$[0]') AS key, e.thread_id, e.date_ms FROM json_each(?2) j
    CROSS JOIN thread_key_numbers k ON k.key_hash = unhex(json_extract(j.value, '$[1]'))
    JOIN emails e ON e.num = k.num
  UNION ALL
  SELECT json_extract(j.value, '$[0]'), e.thread_id, e.date_ms FROM json_each(?2) j
    CROSS JOIN thread_key_hashes k ON k.key_hash = unhex(json_extract(j.value, '$[1]'))
    JOIN emails e ON e.id = k.email_id
  UNION ALL
  SELECT json_extract(j.value, '$[0]'), e.thread_id, e.date_ms FROM json_each(?2) j
    CROSS JOIN thread_keys k ON k.account_id = ?1 AND k.key = json_extract(j.value, '$[0]')
    JOIN emails e ON e.id = k.email_id`;

/** The statements writing new emails' key rows (from `record`), after the emails' own rows. */
export function threadKeyStatements(db: D1Database, rows: unknown[][]): D1PreparedStatement[] {
  return jsonChunks(rows).map((json) =>
    db
      .prepare(
        `INSERT OR IGNORE INTO thread_key_numbers (key_hash, num)
         SELECT unhex(json_extract(j.value, '$[0]')), e.num
         FROM json_each(?) j CROSS JOIN emails e ON e.id = json_extract(j.value, '$[1]')`,
      )
      .bind(json),
  );
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
  /** From `prefetch`: the stored threads naming each key, the latest stored email per subject key. */
  private readonly stored = new Map<string, Thread[]>();
  private readonly storedSubjects = new Map<string, { threadId: string; dateMs: number }>();
  /** Threads merged by this change, to the thread each became. */
  private readonly renamed = new Map<string, string>();

  constructor(db: D1Database, accountId: string) {
    this.db = db;
    this.accountId = accountId;
  }

  /** Reads the stored threads of every key these messages name (and of their subject keys), in two queries. */
  async prefetch(messages: ThreadedMessage[]): Promise<void> {
    const keys = new Set<string>();
    const subjects = new Set<string>();
    for (const m of messages) {
      if (m.gm_thrid) continue;
      for (const key of messageKeys(m)) keys.add(key);
      const { base, isReply } = normalizeSubject(m.subject);
      if (!m.in_reply_to && m.references.length === 0 && isReply && base) subjects.add(SUBJECT_KEY + base);
    }
    const pairs = async (list: Set<string>) =>
      JSON.stringify(await Promise.all([...list].map(async (key) => [key, await keyHash(this.accountId, key)])));
    const [byKey, bySubject] = await this.db.batch([
      this.db
        .prepare(
          `SELECT h.key, h.thread_id, (SELECT MIN(date_ms) FROM emails WHERE thread_id = h.thread_id) AS first_ms
           FROM (SELECT DISTINCT key, thread_id FROM (${EMAILS_NAMING})) h`,
        )
        .bind(this.accountId, await pairs(keys)),
      this.db
        .prepare(`SELECT key, thread_id, MAX(date_ms) AS date_ms FROM (${EMAILS_NAMING}) GROUP BY key`)
        .bind(this.accountId, await pairs(subjects)),
    ]);
    for (const r of (byKey?.results ?? []) as { key: string; thread_id: string; first_ms: number }[])
      this.stored.set(r.key, [...(this.stored.get(r.key) ?? []), { threadId: r.thread_id, firstMs: r.first_ms }]);
    for (const r of (bySubject?.results ?? []) as { key: string; thread_id: string; date_ms: number }[])
      this.storedSubjects.set(r.key, { threadId: r.thread_id, dateMs: r.date_ms });
  }

  /** The thread a thread id stands for now (merges of this change followed). */
  private resolve(threadId: string): string {
    let id = threadId;
    for (let next = this.renamed.get(id); next !== undefined; next = this.renamed.get(id)) id = next;
    return id;
  }

  /**
   * The thread of a new email, the statements that merge threads it links (run before its insert),
   * and the ids of the threads merged into it (their emails changed thread_id).
   */
  async assign(m: ThreadedMessage): Promise<{ threadId: string; statements: D1PreparedStatement[]; merged: string[] }> {
    if (m.gm_thrid)
      return { threadId: await derivedId('thread', `${this.accountId}:gm:${m.gm_thrid}`), statements: [], merged: [] };

    const threads = this.threadsNaming(messageKeys(m));
    if (threads.length === 0) {
      const { base, isReply } = normalizeSubject(m.subject);
      const bySubject =
        !m.in_reply_to && m.references.length === 0 && isReply && base ? this.latestBySubject(base, m.date_ms) : null;
      return { threadId: bySubject ?? newId('thread'), statements: [], merged: [] };
    }
    const [winner, ...later] = threads.sort((a, b) => a.firstMs - b.firstMs || a.threadId.localeCompare(b.threadId));
    if (later.length === 0) return { threadId: winner!.threadId, statements: [], merged: [] };
    return { threadId: winner!.threadId, statements: this.merge(winner!, later), merged: later.map((t) => t.threadId) };
  }

  /** Rows [key_hash (hex), email_id] recording a new email's keys (written after its insert: threadKeyStatements). */
  async record(emailId: string, threadId: string, m: ThreadedMessage): Promise<unknown[][]> {
    if (m.gm_thrid) return [];
    const { base } = normalizeSubject(m.subject);
    const keys = [...messageKeys(m), ...(base ? [SUBJECT_KEY + base] : [])];
    for (const key of keys) {
      const known = this.pending.get(key);
      if (!known || known.dateMs <= m.date_ms) this.pending.set(key, { threadId, dateMs: m.date_ms });
    }
    this.pendingFirst.set(threadId, Math.min(this.pendingFirst.get(threadId) ?? Infinity, m.date_ms));
    return Promise.all(keys.map(async (key) => [await keyHash(this.accountId, key), emailId]));
  }

  /** Threads (stored or pending) holding an email that names one of `keys`, with their first dates. */
  private threadsNaming(keys: string[]): Thread[] {
    const found = new Map<string, number>();
    for (const key of keys) {
      const pending = this.pending.get(key);
      if (pending) found.set(pending.threadId, this.pendingFirst.get(pending.threadId) ?? pending.dateMs);
    }
    for (const key of keys)
      for (const t of this.stored.get(key) ?? []) {
        const id = this.resolve(t.threadId);
        const first = Math.min(t.firstMs, this.pendingFirst.get(id) ?? Infinity);
        found.set(id, Math.min(found.get(id) ?? Infinity, first));
      }
    return [...found].map(([threadId, firstMs]) => ({ threadId, firstMs }));
  }

  /** The latest conversation of the 30 days before `dateMs` with this normalized subject. */
  private latestBySubject(base: string, dateMs: number): string | null {
    const key = SUBJECT_KEY + base;
    const pending = this.pending.get(key);
    const stored = this.storedSubject(key, dateMs);
    const candidates = [
      ...(stored ? [{ threadId: stored.thread_id, dateMs: stored.date_ms }] : []),
      ...(pending && pending.dateMs >= dateMs - SUBJECT_WINDOW_MS ? [pending] : []),
    ].sort((a, b) => b.dateMs - a.dateMs);
    return candidates[0]?.threadId ?? null;
  }

  private storedSubject(key: string, dateMs: number): { thread_id: string; date_ms: number } | null {
    const latest = this.storedSubjects.get(key);
    if (!latest || latest.dateMs < dateMs - SUBJECT_WINDOW_MS) return null;
    return { thread_id: this.resolve(latest.threadId), date_ms: latest.dateMs };
  }

  /** Later threads become `winner`: stored emails by statement, pending ones here. */
  private merge(winner: Thread, later: Thread[]): D1PreparedStatement[] {
    const ids = later.map((t) => t.threadId);
    for (const entry of this.pending.values()) if (ids.includes(entry.threadId)) entry.threadId = winner.threadId;
    for (const id of ids) {
      this.pendingFirst.delete(id);
      this.renamed.set(id, winner.threadId);
    }
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
