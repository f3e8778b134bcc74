/**
 * One Durable Object per account: the owner of that account's sync state (per folder UIDVALIDITY,
 * last UID, HIGHESTMODSEQ), of the lease that says which gateway holds the account, and of the
 * order in which the account's changes are applied. Native RPC; state in the object's SQLite.
 */
import { DurableObject } from 'cloudflare:workers';
import type { Env } from '../env.ts';

export interface Lease {
  gateway_id: string;
  expires_at: number;
}

export class AccountObject extends DurableObject<Env> {
  private readonly sql: SqlStorage;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    ctx.blockConcurrencyWhile(async () => this.migrate());
  }

  private migrate(): void {
    this.sql.exec(`
      CREATE TABLE IF NOT EXISTS lease (
        singleton  INTEGER PRIMARY KEY CHECK (singleton = 1),
        gateway_id TEXT NOT NULL,
        expires_at INTEGER NOT NULL
      );
      CREATE TABLE IF NOT EXISTS folder_cursors (
        path            TEXT PRIMARY KEY,
        uidvalidity     INTEGER NOT NULL,
        last_uid        INTEGER NOT NULL,
        highest_modseq  TEXT
      );
    `);
  }

  /**
   * Grant the account to `gatewayId` for `ttlMs` if nobody holds it, the holder's lease lapsed, or
   * the caller already holds it (renewal). Returns the lease in force afterwards.
   */
  acquireLease(gatewayId: string, ttlMs: number): { granted: boolean; lease: Lease } {
    const now = Date.now();
    const current = this.currentLease();
    if (current && current.gateway_id !== gatewayId && current.expires_at > now) {
      return { granted: false, lease: current };
    }
    const lease = { gateway_id: gatewayId, expires_at: now + ttlMs };
    this.sql.exec(
      'INSERT OR REPLACE INTO lease (singleton, gateway_id, expires_at) VALUES (1, ?, ?)',
      lease.gateway_id,
      lease.expires_at,
    );
    return { granted: true, lease };
  }

  releaseLease(gatewayId: string): void {
    this.sql.exec('DELETE FROM lease WHERE gateway_id = ?', gatewayId);
  }

  currentLease(): Lease | null {
    const rows = this.sql.exec<{ gateway_id: string; expires_at: number }>('SELECT gateway_id, expires_at FROM lease').toArray();
    return rows[0] ?? null;
  }
}
