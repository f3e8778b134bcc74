/**
 * An in-memory stand-in for the Worker's gateway endpoints (common/relay.ts), for gateway tests:
 * checks every signature with common/signing.ts and the bodies with the relay schemas, grants
 * leases, keeps cursors the way the account object does (a `messages` change raises last_uid, a
 * `cursor` change sets it) and records every change and status with its arrival time.
 * The control WebSocket is not served (Node has no WebSocket server): /connect answers 404.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { LEASE_LOST_TYPE } from '../../common/relay-limits.ts';
import {
  ChangesRequest,
  HeartbeatRequest,
  LeaseRequest,
  StatusRequest,
  type AccountStatus,
  type Change,
  type FolderCursor,
  type FolderInfo,
  type MailboxConfig,
} from '../../common/relay.ts';
import { GATEWAY_SIGNATURE_HEADER, verifyRequest } from '../../common/signing.ts';

export interface FakeAccount {
  id: string;
  config: MailboxConfig;
  cursors: Map<string, FolderCursor>;
  holder: string | null;
  leaseUntil: number;
  /** Only this gateway may lease it (lets one test run several gateways side by side). */
  onlyGateway: string | null;
}

export interface RecordedChange {
  accountId: string;
  gatewayId: string;
  at: number;
  /** Position of the batch it came in (changes of one batch share it). */
  batch: number;
  change: Change;
}

export interface RecordedStatus {
  accountId: string;
  at: number;
  status: AccountStatus;
  error: string | null;
}

/** The connect baseline the real Worker stores from the verify result: every folder up to its UIDNEXT. */
export function baselineCursors(folders: FolderInfo[]): FolderCursor[] {
  return folders
    .filter((f) => !f.flags.some((flag) => flag.toLowerCase() === '\\noselect'))
    .map((f) => ({
      path: f.path,
      uidvalidity: f.uidvalidity,
      last_uid: Math.max(0, f.uidnext - 1),
      highest_modseq: f.highest_modseq,
    }));
}

export class FakeWorker {
  readonly secret: string;
  leaseTtlMs: number;
  readonly accounts = new Map<string, FakeAccount>();
  readonly changes: RecordedChange[] = [];
  readonly statuses: RecordedStatus[] = [];
  /** Requests refused for a bad signature. */
  rejected = 0;
  #server: Server;
  #batches = 0;
  #waiters = new Set<() => void>();

  constructor(opts: { secret: string; leaseTtlMs?: number }) {
    this.secret = opts.secret;
    this.leaseTtlMs = opts.leaseTtlMs ?? 30_000;
    this.#server = createServer((req, res) => {
      this.#handle(req, res).catch((err: unknown) => {
        console.error('FAKE500', String(err).slice(0, 600));
        send(res, 500, { type: 'errors/unexpected_error', detail: String(err) });
      });
    });
  }

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise((resolve) => this.#server.close(resolve));
  }

  addAccount(
    id: string,
    config: MailboxConfig,
    cursors: FolderCursor[] = [],
    opts: { onlyGateway?: string } = {},
  ): FakeAccount {
    const account: FakeAccount = {
      id,
      config,
      cursors: new Map(cursors.map((c) => [c.path, c])),
      holder: null,
      leaseUntil: 0,
      onlyGateway: opts.onlyGateway ?? null,
    };
    this.accounts.set(id, account);
    return account;
  }

  /** Resolves with the first truthy value of `check`, re-evaluated after every request. */
  waitFor<T>(check: () => T | undefined | false | null, timeoutMs = 15_000, what = 'condition'): Promise<T> {
    return new Promise((resolve, reject) => {
      const evaluate = () => {
        const value = check();
        if (value) {
          cleanup();
          resolve(value);
        }
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`fake worker: timed out after ${timeoutMs} ms waiting for ${what}`));
      }, timeoutMs);
      const cleanup = () => {
        clearTimeout(timer);
        this.#waiters.delete(evaluate);
      };
      this.#waiters.add(evaluate);
      evaluate();
    });
  }

  changesOf<T extends Change['type']>(
    accountId: string,
    type: T,
  ): (RecordedChange & { change: Extract<Change, { type: T }> })[] {
    return this.changes.filter((c) => c.accountId === accountId && c.change.type === type) as (RecordedChange & {
      change: Extract<Change, { type: T }>;
    })[];
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fake');
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    if (req.method !== 'POST') return send(res, 404, { type: 'errors/not_found' });
    const signature = req.headers[GATEWAY_SIGNATURE_HEADER.toLowerCase()];
    if (
      !(await verifyRequest(this.secret, typeof signature === 'string' ? signature : null, {
        method: 'POST',
        path: url.pathname,
        body,
      }))
    ) {
      this.rejected++;
      return send(res, 401, { type: 'errors/unauthorized' });
    }
    const json: unknown = JSON.parse(body);
    try {
      if (url.pathname === '/internal/gateway/heartbeat')
        return send(res, 200, this.#heartbeat(HeartbeatRequest.parse(json)));
      if (url.pathname === '/internal/gateway/release') return send(res, 200, { ok: true });
      const match = /^\/internal\/gateway\/accounts\/([^/]+)\/(lease|changes|status)$/.exec(url.pathname);
      const account = match ? this.accounts.get(decodeURIComponent(match[1]!)) : undefined;
      if (!match || !account) return send(res, 404, { type: 'errors/not_found' });
      if (match[2] === 'lease') return send(res, 200, this.#lease(account, LeaseRequest.parse(json).gateway_id));
      const request = match[2] === 'changes' ? ChangesRequest.parse(json) : StatusRequest.parse(json);
      if (!this.#holds(account, request.gateway_id))
        return send(res, 409, { type: LEASE_LOST_TYPE, detail: 'lease lost' });
      if ('changes' in request) return send(res, 200, this.#apply(account, request));
      this.statuses.push({
        accountId: account.id,
        at: performance.now(),
        status: request.status,
        error: request.error,
      });
      return send(res, 200, { ok: true });
    } finally {
      for (const waiter of [...this.#waiters]) waiter();
    }
  }

  #holds(account: FakeAccount, gatewayId: string): boolean {
    return account.holder === gatewayId && account.leaseUntil > Date.now();
  }

  #heartbeat(request: HeartbeatRequest) {
    const lost: string[] = [];
    for (const id of request.held) {
      const account = this.accounts.get(id);
      if (account && this.#holds(account, request.gateway_id)) account.leaseUntil = Date.now() + this.leaseTtlMs;
      else lost.push(id);
    }
    const claimable = [...this.accounts.values()]
      .filter((a) => !request.held.includes(a.id) && (a.onlyGateway ?? request.gateway_id) === request.gateway_id)
      .filter((a) => a.holder === null || a.leaseUntil <= Date.now() || a.holder === request.gateway_id)
      .map((a) => a.id);
    return { lost, claimable, release: [], lease_ttl_ms: this.leaseTtlMs };
  }

  #lease(account: FakeAccount, gatewayId: string) {
    if (account.onlyGateway !== null && account.onlyGateway !== gatewayId)
      return { granted: false, holder: account.holder };
    if (account.holder !== null && account.holder !== gatewayId && account.leaseUntil > Date.now())
      return { granted: false, holder: account.holder };
    account.holder = gatewayId;
    account.leaseUntil = Date.now() + this.leaseTtlMs;
    return {
      granted: true,
      account_id: account.id,
      config: account.config,
      cursors: [...account.cursors.values()],
      lease_ttl_ms: this.leaseTtlMs,
    };
  }

  /** Hands the lease to someone else, as a takeover by another gateway would. */
  steal(accountId: string, holder = 'other-gateway'): void {
    const account = this.accounts.get(accountId)!;
    account.holder = holder;
    account.leaseUntil = Date.now() + this.leaseTtlMs;
  }

  #apply(account: FakeAccount, request: ChangesRequest) {
    const at = performance.now();
    const batch = ++this.#batches;
    for (const change of request.changes) {
      this.changes.push({ accountId: account.id, gatewayId: request.gateway_id, at, batch, change });
      if (change.type === 'messages') {
        const cursor = account.cursors.get(change.path);
        const maxUid = Math.max(0, ...change.messages.map((m) => m.uid));
        if (!cursor || cursor.uidvalidity !== change.uidvalidity) {
          account.cursors.set(change.path, {
            path: change.path,
            uidvalidity: change.uidvalidity,
            last_uid: maxUid,
            highest_modseq: null,
          });
        } else if (maxUid > cursor.last_uid) {
          account.cursors.set(change.path, { ...cursor, last_uid: maxUid });
        }
      } else if (change.type === 'cursor') {
        account.cursors.set(change.path, {
          path: change.path,
          uidvalidity: change.uidvalidity,
          last_uid: change.last_uid,
          highest_modseq: change.highest_modseq,
        });
      }
    }
    return { cursors: [...account.cursors.values()] };
  }
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}
