/**
 * Staged sources (common/relay.ts `MessageIn.staged`) that may no longer be needed, kept in the
 * account object's SQLite until they are due. A staged source is named by its SHA-256, so another
 * change on its way (two identical large messages in overlapping batches, or a retry) may name the
 * same object after one change passed it over or the last email using it was deleted: it is not
 * deleted then, but recorded here, and the object's alarm deletes it after STAGED_GRACE_MS unless an
 * email uses it by then or the gateway uploaded it again since (emails/blobs.ts `releaseStaged`).
 *
 * Recorded before the D1 batch that stops using the source, so a crash in between leaves a record
 * (the source is checked again when due) rather than an object nobody deletes.
 */

/**
 * A change naming a staged source is applied within seconds of the upload (at most two batches on
 * their way, a later one waiting at most 30 s for its turn, sync/order.ts); a gateway that fails
 * uploads again in its next pass. Five minutes leaves a wide margin.
 */
export const STAGED_GRACE_MS = 5 * 60_000;

/** Sources released per alarm step (one R2 head each: well inside an invocation's 50 subrequests). */
export const STAGED_STEP = 40;

export interface StagedRelease {
  key: string;
  /** When it was recorded: an upload after this is a new use (the gateway staged it again). */
  recorded_ms: number;
}

export class StagedReleases {
  private readonly sql: SqlStorage;

  constructor(sql: SqlStorage) {
    this.sql = sql;
  }

  migrate(): void {
    this.sql.exec(`CREATE TABLE IF NOT EXISTS staged_releases (
      key TEXT PRIMARY KEY, recorded_ms INTEGER NOT NULL, due_ms INTEGER NOT NULL
    )`);
  }

  /** Records keys to release after the grace (a key recorded again waits from now). */
  defer(keys: string[], now: number): void {
    for (const key of new Set(keys))
      this.sql.exec(
        `INSERT INTO staged_releases (key, recorded_ms, due_ms) VALUES (?, ?, ?)
         ON CONFLICT (key) DO UPDATE SET recorded_ms = excluded.recorded_ms, due_ms = excluded.due_ms`,
        key,
        now,
        now + STAGED_GRACE_MS,
      );
  }

  /** Up to one step of releases whose grace ran out. */
  due(now: number): StagedRelease[] {
    return this.sql
      .exec<{ key: string; recorded_ms: number }>(
        `SELECT key, recorded_ms FROM staged_releases WHERE due_ms <= ? ORDER BY due_ms LIMIT ${STAGED_STEP}`,
        now,
      )
      .toArray();
  }

  /** Releases handled (their objects deleted or kept for good reason). */
  done(keys: string[]): void {
    for (const key of keys) this.sql.exec('DELETE FROM staged_releases WHERE key = ?', key);
  }

  next(): number | null {
    const row = this.sql.exec<{ at: number | null }>('SELECT MIN(due_ms) AS at FROM staged_releases').toArray()[0];
    return row?.at ?? null;
  }

  clear(): void {
    this.sql.exec('DELETE FROM staged_releases');
  }
}
