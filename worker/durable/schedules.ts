/**
 * An account's scheduled sends, decided inside its object. Each schedule is a row in the object's
 * SQLite (`schedules`); the object's alarm is set at the earliest due one. A cancel and the send
 * time cannot both win: both read and change the row synchronously in the single-threaded object,
 * so whichever runs first decides, and the other sees it.
 *
 * At its time a schedule goes through the account's queue of sends (durable/send-queue.ts), the same
 * path as an immediate send, with the same at-most-once guarantees. While no gateway holding the
 * account is connected it waits (tried again every RETRY_MS) and fails after GIVE_UP_MS past its time.
 * An instance that restarts while a send was under way finds the row `sending`: one still waiting in
 * the queue (never handed to a gateway) waits again; any other is settled from the outgoing record
 * (sent, failed, or unknown: never sent again). A try that reached no gateway waits again too.
 */
import type { Env } from '../env.ts';
import type { CommandAnswer } from '../commands/holder.ts';
import type { OutgoingResult } from '../../common/relay.ts';
import { forgetOutgoing, outgoingBlobKey, settleOutgoing } from '../send/outgoing.ts';
import { insertScheduled, setScheduledStatus, type ScheduledRow, type ScheduledStatus } from '../send/scheduled.ts';
import { gatewayObject } from './gateway-stub.ts';
import type { Lease } from './lease.ts';
import { type Admission, isNoGateway, type SendRequest } from './send-queue.ts';

/** How often a due schedule with no connected gateway (or a full queue) is tried again. */
const RETRY_MS = 15_000;
/** A schedule no gateway could send within this long after its time fails. */
const GIVE_UP_MS = 24 * 3600_000;
/** Due schedules started per alarm (each a few subrequests); the rest go in the next one, at once. */
const DUE_PER_ALARM = 10;
/** A `sending` row this old that this instance is not running was left by an earlier one. */
const SENDING_LEFT_MS = 5 * 60_000;

export type Schedule = {
  id: string;
  account_id: string;
  send_at_ms: number;
  /** The composed message's name in R2 (send/outgoing.ts `outgoingBlobKey`). */
  name: string;
  message_id: string;
  append_to: string | null;
};

type ScheduleRow = Schedule & {
  state: 'scheduled' | 'sending';
  next_try_ms: number;
};

/** What the object lends the schedules to send with. */
export interface SendPath {
  admit(): Promise<Admission>;
  release(ticket: string): void;
  send(ticket: string, request: SendRequest, messageId: string): Promise<CommandAnswer<OutgoingResult>>;
  lease(): Lease | null;
  /** Whether the lease holder has reported the account running since its lease was granted. */
  ready(): boolean;
  /** Have the object's alarm run by `due` (a schedule put back to wait). */
  rearm(due: number): void;
  /** An earlier instance's send of this message that never reached a gateway, taken out of the queue. */
  takeBackUnhanded(name: string): boolean;
  keepAlive(work: Promise<unknown>): void;
}

export type CancelResult = { cancelled: true } | { cancelled: false; status: ScheduledStatus | null };

export class Schedules {
  private readonly sql: SqlStorage;
  private readonly env: Env;
  /** Sends this instance has under way (their rows are `sending`). */
  private readonly running = new Set<string>();

  constructor(sql: SqlStorage, env: Env) {
    this.sql = sql;
    this.env = env;
  }

  migrate(): void {
    this.sql.exec(`CREATE TABLE IF NOT EXISTS schedules (
      id TEXT PRIMARY KEY, account_id TEXT NOT NULL, send_at_ms INTEGER NOT NULL, name TEXT NOT NULL,
      message_id TEXT NOT NULL, append_to TEXT, state TEXT NOT NULL, next_try_ms INTEGER NOT NULL
    )`);
  }

  /**
   * Takes a schedule: recorded here first, then its row for the API (GET /emails/scheduled), so a
   * listed schedule is always one this object will send; if the row cannot be written it is dropped.
   */
  async add(s: Schedule, listed: ScheduledRow): Promise<void> {
    this.insert(s);
    try {
      await insertScheduled(this.env.DB, listed).run();
    } catch (err) {
      this.sql.exec('DELETE FROM schedules WHERE id = ?', s.id);
      throw err;
    }
  }

  private insert(s: Schedule): void {
    this.sql.exec(
      "INSERT INTO schedules (id, account_id, send_at_ms, name, message_id, append_to, state, next_try_ms) VALUES (?, ?, ?, ?, ?, ?, 'scheduled', ?)",
      s.id,
      s.account_id,
      s.send_at_ms,
      s.name,
      s.message_id,
      s.append_to,
      s.send_at_ms,
    );
  }

  private row(id: string): ScheduleRow | undefined {
    return this.sql.exec<ScheduleRow>('SELECT * FROM schedules WHERE id = ?', id).toArray()[0];
  }

  /** When the alarm must next run for the schedules, or null. */
  next(): number | null {
    const row = this.sql
      .exec<{ due: number | null }>(
        `SELECT MIN(CASE state WHEN 'scheduled' THEN next_try_ms ELSE next_try_ms + ${SENDING_LEFT_MS} END) AS due FROM schedules`,
      )
      .one();
    return row.due;
  }

  /** A gateway has the account running: schedules waiting for one are tried at once. When the alarm must run, or null. */
  wakeDue(now: number): number | null {
    this.sql.exec(
      "UPDATE schedules SET next_try_ms = ? WHERE state = 'scheduled' AND send_at_ms <= ? AND next_try_ms > ?",
      now,
      now,
      now,
    );
    return this.next();
  }

  /** Cancels a schedule still waiting (decided here, synchronously); else says where it is. */
  async cancel(id: string, reason: string | null = null): Promise<CancelResult> {
    const row = this.row(id);
    if (!row) return { cancelled: false, status: null };
    if (row.state !== 'scheduled') return { cancelled: false, status: row.state };
    this.sql.exec('DELETE FROM schedules WHERE id = ?', id);
    await this.discard(row, 'cancelled', reason);
    return { cancelled: true };
  }

  /**
   * The account is being removed: every waiting schedule is cancelled, in a fixed number of calls
   * however many there are (the purge deletes the rows and messages anyway; this records why).
   */
  async cancelAll(reason: string): Promise<void> {
    const waiting = this.sql.exec<ScheduleRow>("SELECT * FROM schedules WHERE state = 'scheduled'").toArray();
    this.sql.exec("DELETE FROM schedules WHERE state = 'scheduled'");
    if (!waiting.length) return;
    await setScheduledStatus(
      this.env.DB,
      waiting.map((row) => row.id),
      'cancelled',
      reason,
    );
  }

  /** A schedule that will never go: its message and outgoing record go, its status is recorded. */
  private async discard(row: Schedule, status: ScheduledStatus, error: string | null): Promise<void> {
    await setScheduledStatus(this.env.DB, [row.id], status, error);
    if (status === 'cancelled') await forgetOutgoing(this.env.DB, row.account_id, row.message_id);
    else await settleOutgoing(this.env.DB, row.account_id, row.message_id, 'failed', error);
    await this.env.BLOBS.delete(outgoingBlobKey(row.account_id, row.name)).catch(() => undefined);
  }

  /** The alarm's part: starts every schedule whose time has come, settles what an earlier instance left. */
  async runDue(path: SendPath, now: number = Date.now()): Promise<void> {
    const due = this.sql
      .exec<ScheduleRow>(
        `SELECT * FROM schedules WHERE next_try_ms <= ? ORDER BY send_at_ms LIMIT ${DUE_PER_ALARM}`,
        now,
      )
      .toArray();
    // Whether the holder's socket is up, asked once per alarm however many are due.
    let connected: Promise<boolean> | null = null;
    const holderConnected = () => {
      const holder = path.ready() ? path.lease() : null;
      connected ??= holder ? gatewayObject(this.env, holder.gateway_id).isConnected() : Promise.resolve(false);
      return connected;
    };
    for (const row of due) {
      if (row.state === 'sending') {
        if (this.running.has(row.id)) this.sql.exec('UPDATE schedules SET next_try_ms = ? WHERE id = ?', now, row.id);
        else if (row.next_try_ms + SENDING_LEFT_MS <= now) await this.settleLeft(row, path);
      } else if (now - row.send_at_ms > GIVE_UP_MS) {
        this.sql.exec('DELETE FROM schedules WHERE id = ?', row.id);
        await this.discard(
          row,
          'failed',
          'No mail gateway could send it within 24 hours of its send_at (none held the account); nothing was sent.',
        );
      } else {
        await this.start(row.id, path, holderConnected);
      }
    }
  }

  /** Hands one due schedule to the account's queue of sends, unless it was cancelled meanwhile. */
  private async start(id: string, path: SendPath, holderConnected: () => Promise<boolean>): Promise<void> {
    // A holder that has the account running (not one still between its socket and its sync).
    const admission = (await holderConnected()) ? await path.admit() : null;
    const row = this.row(id);
    // From the check above to the state change below nothing else runs: a cancel is before or after.
    if (!row || row.state !== 'scheduled' || !admission?.ok) {
      if (admission?.ok) path.release(admission.ticket);
      const wait = admission && !admission.ok ? admission.retry_after_s * 1000 : RETRY_MS;
      if (row?.state === 'scheduled')
        this.sql.exec('UPDATE schedules SET next_try_ms = ? WHERE id = ?', Date.now() + wait, id);
      return;
    }
    this.sql.exec("UPDATE schedules SET state = 'sending', next_try_ms = ? WHERE id = ?", Date.now(), id);
    this.running.add(id);
    const run = (async () => {
      await setScheduledStatus(this.env.DB, [id], 'sending');
      const request: SendRequest = {
        op: 'send',
        account_id: row.account_id,
        mode: 'send',
        key: row.name,
        append_to: row.append_to,
      };
      const answer = await path.send(admission.ticket, request, row.message_id);
      if (isNoGateway(answer)) {
        // Nothing went out and the message is kept: it waits for a gateway again (until GIVE_UP_MS).
        this.sql.exec(
          "UPDATE schedules SET state = 'scheduled', next_try_ms = ? WHERE id = ?",
          Date.now() + RETRY_MS,
          id,
        );
        await setScheduledStatus(this.env.DB, [id], 'scheduled');
        path.rearm(Date.now() + RETRY_MS);
        return;
      }
      if (answer.ok) await setScheduledStatus(this.env.DB, [id], 'sent');
      else
        await setScheduledStatus(
          this.env.DB,
          [id],
          'failed',
          answer.outcome_unknown
            ? `The outcome is unknown: ${answer.detail} It may have been delivered; check Sent before sending it again.`
            : answer.detail,
        );
      this.sql.exec('DELETE FROM schedules WHERE id = ?', id);
    })().finally(() => this.running.delete(id));
    path.keepAlive(run.catch((err: unknown) => console.error(`scheduled send ${id}:`, (err as Error).message)));
  }

  /** A `sending` row an earlier instance left: tried again if it never left the queue, else settled from its outgoing record. */
  private async settleLeft(row: ScheduleRow, path: SendPath): Promise<void> {
    if (path.takeBackUnhanded(row.name)) {
      // It never left the queue: nothing was sent, and it is tried again at once.
      this.sql.exec("UPDATE schedules SET state = 'scheduled', next_try_ms = ? WHERE id = ?", Date.now(), row.id);
      await setScheduledStatus(this.env.DB, [row.id], 'scheduled');
      return;
    }
    const record = await this.env.DB.prepare(
      'SELECT outcome, outcome_detail FROM outgoing_messages WHERE account_id = ? AND message_id = ?',
    )
      .bind(row.account_id, row.message_id)
      .first<{ outcome: string; outcome_detail: string | null }>();
    if (record?.outcome === 'sent') await setScheduledStatus(this.env.DB, [row.id], 'sent');
    else
      await setScheduledStatus(
        this.env.DB,
        [row.id],
        'failed',
        record?.outcome === 'failed'
          ? (record.outcome_detail ?? 'The send failed; nothing was sent.')
          : "The account's object restarted while the message was with a gateway: the outcome is unknown. It may have been delivered; check Sent before sending it again.",
      );
    this.sql.exec('DELETE FROM schedules WHERE id = ?', row.id);
  }
}
