/**
 * An account's sends, owned by its object rather than by the HTTP request that asked for them. A
 * send is admitted (a bounded queue: a full one answers 429 before anything is stored), accepted
 * (its time budget starts), handed to the gateway holding the account, and ends sent, refused or
 * unknown. Each step is in the object's SQLite before it is taken, and the outcome is written to
 * `outgoing_messages` by the object itself, so a client that goes away, or a request cancelled,
 * changes nothing: the Idempotency-Key's repeat finds the outcome there (send/idempotency.ts).
 *
 * An object that restarts finds what an earlier instance left: a send only accepted never reached a
 * gateway (recorded as failed: nothing went out); one handed on stays unknown until the gateway's
 * report, the synced copy, or the key's final "outcome unknown" settles it. Nothing is sent again.
 */
import { OutgoingResult, type GatewayRequest } from '../../common/relay.ts';
import { answerOf, callHolder, sendBudget, type CommandAnswer } from '../commands/holder.ts';
import type { Env } from '../env.ts';
import { ApiError, NothingSent, OutcomeUnknown } from '../lib/errors.ts';
import { outgoingBlobKey, settleOutgoing } from '../send/outgoing.ts';
import type { Lease } from './lease.ts';

export type SendRequest = Extract<GatewayRequest, { op: 'send' }>;

/** Default of SEND_QUEUE_LIMIT: sends one account may have admitted and not finished. */
const QUEUE_LIMIT_DEFAULT = 16;
/** An admission whose request never came back with its message (it died composing) is freed after this. */
const ADMISSION_TTL_MS = 2 * 60_000;
/** Less than this left of a send's budget when its turn comes: it is refused rather than started. */
const MIN_TURN_MS = 1_000;
/** Message-IDs taken or fenced are kept as long as an Idempotency-Key lasts (send/idempotency.ts). */
const SEND_IDS_KEPT_MS = 24 * 60 * 60 * 1000;

export function sendQueueLimit(env: Env): number {
  const limit = Number(env.SEND_QUEUE_LIMIT);
  return Number.isInteger(limit) && limit >= 1 && limit <= 1000 ? limit : QUEUE_LIMIT_DEFAULT;
}

export type Admission = { ok: true; ticket: string } | { ok: false; retry_after_s: number };

export class SendQueue {
  private readonly sql: SqlStorage;
  private readonly env: Env;
  /** Admitted sends whose message has not arrived yet: when each was admitted (its budget's start). */
  private readonly admitted = new Map<string, number>();
  private recovered: Promise<void> | null = null;

  constructor(sql: SqlStorage, env: Env) {
    this.sql = sql;
    this.env = env;
  }

  migrate(): void {
    this.sql.exec(`CREATE TABLE IF NOT EXISTS sends (
      name TEXT PRIMARY KEY, account_id TEXT NOT NULL, message_id TEXT NOT NULL,
      state TEXT NOT NULL, accepted_ms INTEGER NOT NULL
    )`);
    // Every Message-ID this object took to send, or fenced off before it could (see `fence`), for as
    // long as an Idempotency-Key lasts. `since`: when this object began keeping them.
    this.sql.exec(`CREATE TABLE IF NOT EXISTS send_ids (
      message_id TEXT PRIMARY KEY, state TEXT NOT NULL, at_ms INTEGER NOT NULL
    )`);
    this.sql.exec("INSERT OR IGNORE INTO send_ids (message_id, state, at_ms) VALUES ('', 'since', ?)", Date.now());
  }

  /**
   * A send whose request handed its Message-ID on (its Idempotency-Key says so) and then ended: did
   * this object take it? 'taken' (or not known: handed before this object kept its Message-IDs), its
   * outcome comes from the gateway or the synced copy; 'fenced': it never came and never will (a late
   * arrival is refused), so nothing was sent and the key may be used again.
   */
  fence(messageId: string, handedAtMs: number): 'taken' | 'fenced' {
    const state = this.idState(messageId);
    if (state) return state === 'fenced' ? 'fenced' : 'taken';
    const since = this.sql.exec<{ at_ms: number }>("SELECT at_ms FROM send_ids WHERE message_id = ''").one().at_ms;
    if (handedAtMs < since) return 'taken';
    this.sql.exec("INSERT INTO send_ids (message_id, state, at_ms) VALUES (?, 'fenced', ?)", messageId, Date.now());
    return 'fenced';
  }

  /** 'taken', 'fenced', or undefined: what this object knows of a Message-ID. */
  private idState(messageId: string): string | undefined {
    return this.sql.exec<{ state: string }>('SELECT state FROM send_ids WHERE message_id = ?', messageId).toArray()[0]
      ?.state;
  }

  /** Takes the Message-ID unless it was fenced off (false); forgets those older than a key's life. */
  private take(messageId: string): boolean {
    const now = Date.now();
    this.sql.exec("DELETE FROM send_ids WHERE at_ms < ? AND message_id != ''", now - SEND_IDS_KEPT_MS);
    if (this.idState(messageId) === 'fenced') return false;
    this.sql.exec("INSERT OR IGNORE INTO send_ids (message_id, state, at_ms) VALUES (?, 'taken', ?)", messageId, now);
    return true;
  }

  /** A place in the queue, or how long to wait for one. */
  async admit(): Promise<Admission> {
    await this.recover();
    const now = Date.now();
    for (const [ticket, at] of this.admitted) if (now - at > ADMISSION_TTL_MS) this.admitted.delete(ticket);
    // The queue: admissions waiting for their message, and accepted sends still within their budget
    // (a send's record outlives its budget only if its run was cut short; it no longer holds a place).
    const budgetMs = this.budgetMs();
    const running = this.sql
      .exec<{ accepted_ms: number }>('SELECT accepted_ms FROM sends WHERE accepted_ms > ?', now - budgetMs)
      .toArray()
      .map((r) => r.accepted_ms);
    const starts = [...this.admitted.values(), ...running];
    if (starts.length >= sendQueueLimit(this.env)) {
      const freeAt = Math.min(...starts) + budgetMs;
      return { ok: false, retry_after_s: Math.max(1, Math.ceil((freeAt - now) / 1000)) };
    }
    const ticket = crypto.randomUUID();
    this.admitted.set(ticket, now);
    return { ok: true, ticket };
  }

  /** Gives the place back (the request failed before its message was ready). */
  release(ticket: string): void {
    this.admitted.delete(ticket);
  }

  private budgetMs(): number {
    const budget = sendBudget(this.env);
    return budget.waitMs + budget.timeoutMs;
  }

  /**
   * Runs an admitted send on the account's command chain (`chain`) and records its outcome. The
   * budget runs from admission: a send whose turn comes too late is refused, nothing sent.
   */
  async run(
    ticket: string,
    request: SendRequest,
    messageId: string,
    chain: <T>(work: () => Promise<T>) => Promise<CommandAnswer<T>>,
    lease: () => Lease | null,
    scheduled = false,
  ): Promise<CommandAnswer<OutgoingResult>> {
    await this.recover();
    if (!this.take(messageId)) {
      this.admitted.delete(ticket);
      return answerOf(() => {
        throw new NothingSent(
          'already_exists',
          "A repeat of this send's Idempotency-Key found it had not reached the account's queue and gave it up; nothing was sent.",
        );
      });
    }
    const admittedAt = this.admitted.get(ticket) ?? Date.now();
    // From here its record holds its place in the queue.
    this.record(request, messageId, 'accepted', admittedAt);
    this.admitted.delete(ticket);
    const deadline = admittedAt + this.budgetMs();
    // What follows the send runs on the chain: when the caller's request is cancelled, the runtime
    // drops this call's own continuation, while the chain carries on and ends the send.
    // A scheduled send that reached no gateway keeps its message and record: it is tried again.
    let again = false;
    return chain(async () => {
      try {
        return await this.carryOut(request, messageId, deadline, lease, (answer) => {
          again = scheduled && isNoGateway(answer);
          return !again;
        });
      } finally {
        this.sql.exec('DELETE FROM sends WHERE name = ?', request.key);
        if (!again)
          await this.env.BLOBS.delete(outgoingBlobKey(request.account_id, request.key)).catch(() => undefined);
      }
    });
  }

  /**
   * Hands the send to the gateway and records its outcome. Only a failure known to have sent nothing
   * is thrown as NothingSent; anything else once the gateway may have it is unknown. A failure to
   * record the outcome does not change the answer: the gateway's report or the synced copy settles it.
   */
  private async carryOut(
    request: SendRequest,
    messageId: string,
    deadline: number,
    lease: () => Lease | null,
    ends: (answer: CommandAnswer<OutgoingResult>) => boolean,
  ): Promise<OutgoingResult> {
    const answer = await answerOf(async () => {
      const left = deadline - Date.now();
      if (left < MIN_TURN_MS)
        throw new NothingSent(
          'provider_error',
          "The send waited in the account's queue past its time budget (SEND_TIMEOUT_SECONDS) behind earlier sends; nothing was sent. Send it again.",
        );
      this.sql.exec("UPDATE sends SET state = 'handed' WHERE name = ?", request.key);
      let result: unknown;
      try {
        const budget = sendBudget(this.env);
        const waitMs = Math.min(budget.waitMs, left - MIN_TURN_MS);
        result = await callHolder(this.env, lease, request, { waitMs, timeoutMs: budget.timeoutMs, deadline });
      } catch (err) {
        if (err instanceof OutcomeUnknown) throw err;
        // A gateway's refusal, or no gateway to hand it to.
        if (err instanceof ApiError) throw new NothingSent(err.kind, err.detail, err.headers);
        throw new OutcomeUnknown(`The send's answer could not be read: ${(err as Error).message}.`);
      }
      const parsed = OutgoingResult.safeParse(result);
      if (!parsed.success) throw new OutcomeUnknown(`The send's answer could not be read: ${parsed.error.message}.`);
      return parsed.data;
    });
    const outcome = answer.ok ? 'sent' : answer.nothing_sent ? 'failed' : null;
    if (outcome && ends(answer)) {
      await settleOutgoing(this.env.DB, request.account_id, messageId, outcome, answer.ok ? null : answer.detail).catch(
        (err: unknown) => console.error('could not record a send outcome:', err instanceof Error ? err.message : err),
      );
    }
    if (answer.ok) return answer.value;
    if (answer.nothing_sent) throw new NothingSent(answer.kind, answer.detail);
    throw new OutcomeUnknown(answer.detail);
  }

  /**
   * A send an earlier instance of the object left still waiting in the queue (never handed to a
   * gateway) is taken out of it: true, and nothing of it was sent. False when it was handed on, or
   * is not in the queue.
   */
  takeBackUnhanded(name: string): boolean {
    const row = this.sql.exec<{ state: string }>('SELECT state FROM sends WHERE name = ?', name).toArray()[0];
    if (row?.state !== 'accepted') return false;
    this.sql.exec('DELETE FROM sends WHERE name = ?', name);
    return true;
  }

  private record(request: SendRequest, messageId: string, state: 'accepted', acceptedMs: number): void {
    this.sql.exec(
      'INSERT OR REPLACE INTO sends (name, account_id, message_id, state, accepted_ms) VALUES (?, ?, ?, ?, ?)',
      request.key,
      request.account_id,
      messageId,
      state,
      acceptedMs,
    );
  }

  /** Once per instance, before its first send: settles what an earlier instance left. */
  private recover(): Promise<void> {
    this.recovered ??= this.settleLeftovers().catch((err: unknown) => {
      this.recovered = null; // tried again before the next send
      throw err;
    });
    return this.recovered;
  }

  private async settleLeftovers(): Promise<void> {
    const left = this.sql
      .exec<{ name: string; account_id: string; message_id: string; state: string }>(
        'SELECT name, account_id, message_id, state FROM sends',
      )
      .toArray();
    for (const send of left) {
      if (send.state === 'accepted')
        await settleOutgoing(
          this.env.DB,
          send.account_id,
          send.message_id,
          'failed',
          "the account's object restarted before handing the message to a gateway; nothing was sent",
        );
      this.sql.exec('DELETE FROM sends WHERE name = ?', send.name);
    }
  }
}

/**
 * Nothing was sent because no gateway could take it (none held the account, its socket was gone, or
 * the server could not be reached): a later try may succeed. A refusal by the server is final.
 */
export function isNoGateway(answer: CommandAnswer<unknown>): boolean {
  return !answer.ok && answer.nothing_sent === true && answer.kind === 'provider_error';
}
