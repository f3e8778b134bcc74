/**
 * The rig of the gateway tests: a real Dovecot + Postfix (test/mailserver) and an in-memory fake
 * Worker (./fake-worker.ts), gateways run as their own processes (`node gateway/main.ts`, exactly
 * as `npm start` runs them), and what to wait for in what the fake Worker recorded. A test file
 * calls `useGatewayRig()` once; `mail` and `worker` are set from its beforeAll.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import tls from 'node:tls';
import { afterAll, afterEach, beforeAll } from 'vitest';
import type { MailboxConfig } from '../../common/relay.ts';
import { startMailServer, type MailServer } from '../mailserver/mailserver.ts';
import { findUser, readCa } from '../mailserver/client.ts';
import { FakeWorker, type RecordedChange } from './fake-worker.ts';

export const root = fileURLToPath(new URL('../..', import.meta.url));
export const SECRET = `test-secret-${randomUUID()}`;
export const GATEWAY_ID = 'gw-test';

export let mail: MailServer;
export let worker: FakeWorker;
export let workerUrl: string;

export function configFor(name: string, password?: string, on: MailServer = mail): MailboxConfig {
  const u = findUser(on, name);
  const server = { host: on.host, user: u.user, password: password ?? u.password };
  return {
    email: u.email,
    display_name: null,
    imap: { ...server, port: on.imapPort, encryption: 'SSL' },
    smtp: { ...server, port: on.smtpPort, encryption: 'STARTTLS' },
  };
}

/** The gateway as a child process with its logs kept for failure reports. */
export class GatewayProcess {
  readonly logs: string[] = [];
  readonly exited: Promise<number | null>;
  #proc: ChildProcess;

  constructor(env: Record<string, string> = {}) {
    this.#proc = spawn(process.execPath, ['gateway/main.ts'], {
      cwd: root,
      env: {
        ...process.env,
        WORKER_URL: workerUrl,
        GATEWAY_SECRET: SECRET,
        GATEWAY_ID,
        NODE_EXTRA_CA_CERTS: mail.caFile,
        ALLOW_PRIVATE_MAIL_HOSTS: 'true',
        GATEWAY_POLL_INTERVAL_MS: '500',
        GATEWAY_RECONNECT_MIN_MS: '200',
        GATEWAY_RECONNECT_MAX_MS: '1000',
        GATEWAY_AUTH_RETRY_MS: '60000',
        GATEWAY_LOG_LEVEL: 'debug',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    for (const stream of [this.#proc.stdout!, this.#proc.stderr!]) {
      let partial = '';
      stream.setEncoding('utf8');
      stream.on('data', (chunk: string) => {
        const lines = (partial + chunk).split('\n');
        partial = lines.pop()!;
        this.logs.push(...lines.filter(Boolean));
      });
    }
    this.exited = new Promise((resolve) => this.#proc.once('exit', (code) => resolve(code)));
  }

  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
    if (this.#proc.exitCode === null && this.#proc.signalCode === null) this.#proc.kill(signal);
    return this.exited;
  }
}

const gateways: GatewayProcess[] = [];
export function startGateway(env?: Record<string, string>): GatewayProcess {
  const gateway = new GatewayProcess(env);
  gateways.push(gateway);
  return gateway;
}

export function subjectOf(raw: string): string | undefined {
  return /^Subject: (.*)$/m.exec(Buffer.from(raw, 'base64').toString('utf8'))?.[1]?.trim();
}

/** The recorded `messages` changes of an account, flattened to one entry per message. */
export function messagesOf(accountId: string, path?: string) {
  return worker
    .changesOf(accountId, 'messages')
    .filter((c) => path === undefined || c.change.path === path)
    .flatMap((c) =>
      c.change.messages.map((m) => ({
        ...m,
        path: c.change.path,
        at: c.at,
        batch: c.batch,
        subject: subjectOf(m.raw),
        record: c,
      })),
    );
}

/** "path/uid" of every message in these recorded changes. */
export function messageKeys(changes: RecordedChange[]): string[] {
  return changes.flatMap(({ change }) =>
    change.type === 'messages' ? change.messages.map((m) => `${change.path}/${m.uid}`) : [],
  );
}

export function waitForMessage(accountId: string, subject: string, timeoutMs = 15_000) {
  return worker.waitFor(
    () => messagesOf(accountId).find((m) => m.subject === subject),
    timeoutMs,
    `message "${subject}"`,
  );
}

/** The recorded `vanished` change of an account that reports this UID gone from a folder. */
export function waitForVanished(accountId: string, path: string, uid: number, timeoutMs: number) {
  return worker.waitFor(
    () => worker.changesOf(accountId, 'vanished').find((c) => c.change.path === path && c.change.uids.includes(uid)),
    timeoutMs,
    `${path} vanished`,
  );
}

export function waitForStatus(accountId: string, status: string, after = 0, timeoutMs = 20_000) {
  return worker.waitFor(
    () => worker.statuses.find((s, i) => i >= after && s.accountId === accountId && s.status === status),
    timeoutMs,
    `status ${status}`,
  );
}

export async function deliverTo(user: string, subject: string, opts: { wait?: boolean } = {}) {
  return mail.deliver({
    from: 'someone@remote.test',
    to: findUser(mail, user).email,
    subject,
    text: `body of ${subject}`,
    ...opts,
  });
}

/** Starts the rig's Dovecot + Postfix and fake Worker for the test file, and stops them (and its gateways) after it. */
export function useGatewayRig(): void {
  beforeAll(async () => {
    mail = await startMailServer({ users: ['alice', 'bob', 'carol'] });
    // verify() runs in this process: trust the test CA here too (the gateway process gets NODE_EXTRA_CA_CERTS).
    tls.setDefaultCACertificates([...tls.getCACertificates('default'), readCa(mail)]);
    worker = new FakeWorker({ secret: SECRET, leaseTtlMs: 3_000 });
    workerUrl = await worker.start();
  });

  afterAll(async () => {
    await Promise.all(gateways.map((g) => g.stop('SIGKILL')));
    await worker?.stop();
    await mail?.stop();
  });

  afterEach((ctx) => {
    if (ctx.task.result?.state === 'fail') {
      for (const g of gateways) console.log(`--- gateway log (last 60 lines)\n${g.logs.slice(-60).join('\n')}`);
    }
  });
}
