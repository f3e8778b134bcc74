/**
 * The whole service for end-to-end tests, started the way a user starts it: `npm start` (wrangler
 * dev: real workerd, local D1/R2/Queues) with its own state folder and port, plus gateway processes
 * the test controls (so it can kill -9 one). Also reads the local D1 files directly, for assertions
 * about what is stored: each by the binding it is (DB, the directory; MAIL_DB_2, … with MAIL_SHARDS).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DatabaseSync } from 'node:sqlite';
import { createMailboxClient, type MailboxClient } from '../../client/index.ts';
import { startMailServer, type MailServer } from '../mailserver/mailserver.ts';
import { checkedFetch, checkResponse } from './contract.ts';
import { DIRECTORY, openD1Files } from './d1-files.ts';
import { freePort, waitForHttp } from './helpers.ts';
import { copyStateTemplate } from './state-template.ts';

export interface Service {
  base: string;
  adminKey: string;
  gatewaySecret: string;
  stateDir: string;
  /** What `npm start` (wrangler dev, the Worker's console) printed, newest last (the last 5,000 lines). */
  workerLog: string[];
  /** Calls `listener` with every line `npm start` prints from now on (for more than workerLog keeps). */
  onWorkerLine(listener: (line: string) => void): void;
  /** Gateways started so far, with their logs. */
  gateways: GatewayProcess[];
  /** Start a gateway process; its output goes to the returned log array. */
  /** `nodeFlags`: V8/Node flags before the entry (e.g. `npm run gateway`'s, some refused in NODE_OPTIONS). */
  startGateway(id?: string, env?: Record<string, string>, nodeFlags?: string[]): GatewayProcess;
  /** Call the API with the admin key; every answer is checked against the OpenAPI document. */
  api<T = any>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }>;
  /** The typed client (client/), with the admin key; its answers are checked against the document too. */
  client: MailboxClient;
  /** fetch, with every answer checked against the document (for calls the helpers above do not make). */
  fetch: typeof fetch;
  /** Every email of an account through GET /emails, following the cursor (pages of 250). */
  listEmails(accountId: string): Promise<any[]>;
  /** Stop `npm start` and start it again on the same port and state, with these environment changes. */
  restartWorker(workerEnv?: Record<string, string>): Promise<void>;
  /** A read-only query on the directory database (DB): accounts, API keys, endpoints, gateways, events of no account or of an account's own row. */
  query<T = Record<string, unknown>>(sql: string, ...params: (string | number)[]): T[];
  /** A read-only query on the database holding `accountId`'s mail (its shard, `accounts.shard`): emails, folders, its mail events, sends. */
  mailQuery<T = Record<string, unknown>>(accountId: string, sql: string, ...params: (string | number)[]): T[];
  /** A read-only query on every database, DB first then MAIL_DB_2, …: each one's binding and rows (totals, "gone everywhere"). */
  queryEach<T = Record<string, unknown>>(
    sql: string,
    ...params: (string | number)[]
  ): { database: string; rows: T[] }[];
  stop(): Promise<void>;
}

export interface GatewayProcess {
  child: ChildProcess;
  log: string[];
  kill(signal?: NodeJS.Signals): Promise<void>;
}

function collect(child: ChildProcess, log: string[], echo: boolean, listeners: ((line: string) => void)[] = []): void {
  for (const stream of [child.stdout, child.stderr]) {
    stream?.setEncoding('utf8');
    stream?.on('data', (chunk: string) => {
      const lines = chunk.split('\n').filter(Boolean);
      log.push(...lines);
      for (const listener of listeners) for (const line of lines) listener(line);
      if (log.length > 5000) log.splice(0, log.length - 5000);
      if (echo) process.stderr.write(chunk);
    });
  }
}

const exited = (child: ChildProcess) =>
  child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise<void>((r) => child.once('exit', () => r()));

/**
 * `gatewayEnv`: let `npm start` run its own gateway too, with these extra environment variables
 * (by default the test starts and kills gateways itself).
 */
export async function startService(
  options: { echo?: boolean; gatewayEnv?: Record<string, string>; workerEnv?: Record<string, string> } = {},
): Promise<Service> {
  const echo = options.echo ?? process.env.E2E_ECHO === '1';
  const port = await freePort();
  const stateDir = mkdtempSync(join(tmpdir(), 'mailbox-e2e-'));
  const adminKey = `mbx_admin_${randomBytes(16).toString('hex')}`;
  const gatewaySecret = randomBytes(32).toString('hex');
  const base = `http://127.0.0.1:${port}`;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ADMIN_API_KEY: adminKey,
    GATEWAY_SECRET: gatewaySecret,
    CREDENTIALS_KEY: randomBytes(32).toString('base64'),
    ALLOW_PRIVATE_WEBHOOK_URLS: 'true',
    PORT: String(port),
    PERSIST_TO: stateDir,
    ...(options.gatewayEnv ?? { START_GATEWAY: '0' }),
    ...options.workerEnv,
  };
  // The run's migrated databases (test/node/state-template.ts), one for each shard, when there are.
  copyStateTemplate(stateDir, env.MAIL_SHARDS);
  const workerLog: string[] = [];
  const workerListeners: ((line: string) => void)[] = [];
  const startWorker = async (workerEnv: NodeJS.ProcessEnv) => {
    const child = spawn('npm', ['start'], { env: workerEnv, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    collect(child, workerLog, echo, workerListeners);
    try {
      await waitForHttp(`${base}/`, 240_000);
    } catch (err) {
      throw new Error(`npm start did not come up: ${String(err)}\n${workerLog.slice(-40).join('\n')}`);
    }
    return child;
  };
  const stopWorker = async () => {
    try {
      process.kill(-worker.pid!, 'SIGINT');
    } catch {
      // already gone
    }
    await Promise.race([exited(worker), new Promise((r) => setTimeout(r, 8000))]);
  };
  let worker = await startWorker(env);

  const gateways: GatewayProcess[] = [];
  let dbs: Map<string, DatabaseSync> | null = null;
  const openDatabases = () => (dbs ??= openD1Files(stateDir));
  const database = (binding: string) => {
    const db = openDatabases().get(binding);
    if (!db) throw new Error(`no local D1 file for ${binding} (databases: ${[...openDatabases().keys()].join(', ')})`);
    return db;
  };

  const service: Service = {
    base,
    adminKey,
    gatewaySecret,
    stateDir,
    workerLog,
    onWorkerLine(listener) {
      workerListeners.push(listener);
    },
    startGateway(id = `gw-${randomBytes(3).toString('hex')}`, extra = {}, nodeFlags = []) {
      const log: string[] = [];
      const child = spawn(process.execPath, [...nodeFlags, 'gateway/main.ts'], {
        env: {
          ...process.env,
          WORKER_URL: base,
          GATEWAY_SECRET: gatewaySecret,
          GATEWAY_ID: id,
          // The test mail servers are on this machine.
          ALLOW_PRIVATE_MAIL_HOSTS: 'true',
          ...extra,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      collect(child, log, echo);
      const gateway: GatewayProcess = {
        child,
        log,
        async kill(signal: NodeJS.Signals = 'SIGTERM') {
          child.kill(signal);
          await exited(child);
        },
      };
      gateways.push(gateway);
      return gateway;
    },
    async api(method, path, body) {
      const response = await fetch(`${base}/api/v1${path}`, {
        method,
        headers: { 'X-API-KEY': adminKey, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await response.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // keep text
      }
      checkResponse(method, `/api/v1${path}`, response.status, response.headers.get('content-type'), parsed);
      return { status: response.status, body: parsed as any };
    },
    async listEmails(accountId) {
      const out: any[] = [];
      let cursor: string | undefined;
      do {
        const { data, error, response } = await service.client.GET('/api/v1/emails', {
          params: { query: { account_id: accountId, limit: 250, cursor } },
        });
        if (!data)
          throw Object.assign(new Error(`GET /emails answered ${response.status}: ${JSON.stringify(error)}`), {
            status: response.status,
          });
        out.push(...data.data);
        cursor = data.cursor ?? undefined;
      } while (cursor);
      return out;
    },
    query(sql, ...params) {
      return database(DIRECTORY)
        .prepare(sql)
        .all(...params) as any[];
    },
    mailQuery(accountId, sql, ...params) {
      const [account] = service.query<{ shard: string | null }>('SELECT shard FROM accounts WHERE id = ?', accountId);
      if (!account) throw new Error(`mailQuery: no account ${accountId} in the directory (removed? use queryEach)`);
      return database(account.shard ?? DIRECTORY)
        .prepare(sql)
        .all(...params) as any[];
    },
    queryEach(sql, ...params) {
      return [...openDatabases()].map(([name, db]) => ({
        database: name,
        rows: db.prepare(sql).all(...params) as any[],
      }));
    },
    async restartWorker(workerEnv) {
      for (const db of dbs?.values() ?? []) db.close();
      dbs = null;
      await stopWorker();
      worker = await startWorker({ ...env, ...(workerEnv ?? {}) });
    },
    gateways,
    client: createMailboxClient({ baseUrl: base, apiKey: adminKey, fetch: checkedFetch() }),
    fetch: checkedFetch(),
    async stop() {
      for (const db of dbs?.values() ?? []) db.close();
      await Promise.all(gateways.map((g) => g.kill('SIGKILL')));
      await stopWorker();
      rmSync(stateDir, { recursive: true, force: true });
    },
  };
  return service;
}

/** Poll `probe` until it returns a truthy value; the last value (or error) is reported on timeout. */
export async function eventually<T>(
  probe: () => Promise<T> | T,
  { timeoutMs = 30_000, intervalMs = 100, what = 'condition' } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      last = await probe();
      if (last) return last as NonNullable<T>;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}; last: ${last instanceof Error ? last.message : JSON.stringify(last)?.slice(0, 500)}`,
      );
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** For afterEach: when a test failed, print the tail of the Worker's and the gateways' logs. */
export function dumpLogsOnFailure(ctx: { task: { result?: { state?: string } } }, service: Service | undefined): void {
  if (ctx.task.result?.state !== 'fail' || !service) return;
  console.error(`--- worker log (tail) ---\n${service.workerLog.slice(-60).join('\n')}`);
  for (const [i, g] of service.gateways.entries())
    console.error(`--- gateway ${i} log (tail) ---\n${g.log.slice(-40).join('\n')}`);
}

export interface EndToEnd {
  mail: MailServer;
  service: Service;
  gateway: GatewayProcess;
}

/** The usual end-to-end setup: a private Dovecot + Postfix, `npm start`, and one gateway trusting the mail server's CA. */
export async function startEndToEnd(
  gatewayId: string,
  gatewayEnv: Record<string, string> = {},
  mailOptions: Parameters<typeof startMailServer>[0] = {},
  workerEnv: Record<string, string> = {},
): Promise<EndToEnd> {
  const mail = await startMailServer(mailOptions);
  const service = await startService({ workerEnv });
  const gateway = service.startGateway(gatewayId, { NODE_EXTRA_CA_CERTS: mail.caFile, ...gatewayEnv });
  return { mail, service, gateway };
}

export async function stopEndToEnd(parts: Partial<EndToEnd>): Promise<void> {
  await parts.service?.stop();
  await parts.mail?.stop();
}
