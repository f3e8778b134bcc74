/**
 * The gateway against a real Dovecot + Postfix (test/mailserver) and an in-memory fake Worker
 * (./fake-worker.ts). The gateway runs as its own process (`node gateway/main.ts`), exactly as
 * `npm start` runs it; `verify` is called in-process.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer, connect as tcpConnect } from 'node:net';
import tls from 'node:tls';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ImapFlow } from 'imapflow';
import type { MailboxConfig } from '../../common/relay.ts';
import { GatewayError } from '../../gateway/errors.ts';
import { listFolders } from '../../gateway/imap.ts';
import { verifyMailbox } from '../../gateway/verify.ts';
import { startMailServer, type MailServer } from '../mailserver/mailserver.ts';
import { findUser, openImap, readCa } from '../mailserver/client.ts';
import { baselineCursors, FakeWorker, type RecordedChange } from './fake-worker.ts';
import { freePort } from './helpers.ts';
import { imapProxy, type ImapProxy } from './imap-proxy.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const SECRET = `test-secret-${randomUUID()}`;
const GATEWAY_ID = 'gw-test';

let mail: MailServer;
let worker: FakeWorker;
let workerUrl: string;

function configFor(name: string, password?: string, on: MailServer = mail): MailboxConfig {
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
class GatewayProcess {
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
function startGateway(env?: Record<string, string>): GatewayProcess {
  const gateway = new GatewayProcess(env);
  gateways.push(gateway);
  return gateway;
}

function subjectOf(raw: string): string | undefined {
  return /^Subject: (.*)$/m.exec(Buffer.from(raw, 'base64').toString('utf8'))?.[1]?.trim();
}

/** The recorded `messages` changes of an account, flattened to one entry per message. */
function messagesOf(accountId: string, path?: string) {
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
function messageKeys(changes: RecordedChange[]): string[] {
  return changes.flatMap(({ change }) =>
    change.type === 'messages' ? change.messages.map((m) => `${change.path}/${m.uid}`) : [],
  );
}

function waitForMessage(accountId: string, subject: string, timeoutMs = 15_000) {
  return worker.waitFor(
    () => messagesOf(accountId).find((m) => m.subject === subject),
    timeoutMs,
    `message "${subject}"`,
  );
}

/** The recorded `vanished` change of an account that reports this UID gone from a folder. */
function waitForVanished(accountId: string, path: string, uid: number, timeoutMs: number) {
  return worker.waitFor(
    () => worker.changesOf(accountId, 'vanished').find((c) => c.change.path === path && c.change.uids.includes(uid)),
    timeoutMs,
    `${path} vanished`,
  );
}

function waitForStatus(accountId: string, status: string, after = 0, timeoutMs = 20_000) {
  return worker.waitFor(
    () => worker.statuses.find((s, i) => i >= after && s.accountId === accountId && s.status === status),
    timeoutMs,
    `status ${status}`,
  );
}

async function deliverTo(user: string, subject: string, opts: { wait?: boolean } = {}) {
  return mail.deliver({
    from: 'someone@remote.test',
    to: findUser(mail, user).email,
    subject,
    text: `body of ${subject}`,
    ...opts,
  });
}

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

describe('verify', () => {
  it('logs in to IMAP and SMTP and answers with the folders and their roles', async () => {
    const result = await verifyMailbox(configFor('carol'));
    const byPath = new Map(result.folders.map((f) => [f.path, f]));
    expect(byPath.get('INBOX')?.special_use).toBe('\\Inbox');
    for (const [path, use] of [
      ['Sent', '\\Sent'],
      ['Drafts', '\\Drafts'],
      ['Trash', '\\Trash'],
      ['Junk', '\\Junk'],
      ['Archive', '\\Archive'],
    ]) {
      expect(byPath.get(path!)?.special_use, path).toBe(use);
    }
    expect(byPath.get('INBOX')!.uidvalidity).toBeGreaterThan(0);
    expect(byPath.get('INBOX')!.uidnext).toBeGreaterThan(0);
    expect(byPath.get('INBOX')!.highest_modseq).toMatch(/^\d+$/);
  });

  it('works over STARTTLS and implicit-TLS SMTP too', async () => {
    const config = configFor('carol');
    config.imap = { ...config.imap, port: mail.imapPlainPort, encryption: 'STARTTLS' };
    config.smtp = { ...config.smtp, port: mail.smtpsPort, encryption: 'SSL' };
    expect((await verifyMailbox(config)).folders.length).toBeGreaterThan(5);
  });

  it('maps a wrong password to invalid_credentials, without the password in the detail', async () => {
    const password = 'wrong-password-XYZ';
    const err = await verifyMailbox(configFor('carol', password)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GatewayError);
    expect((err as GatewayError).kind).toBe('invalid_credentials');
    expect((err as GatewayError).message).not.toContain(password);
  });

  it('maps a wrong SMTP password alone to invalid_credentials', async () => {
    const config = configFor('carol');
    config.smtp = { ...config.smtp, password: 'nope' };
    const err = await verifyMailbox(config).catch((e: unknown) => e);
    expect((err as GatewayError).kind).toBe('invalid_credentials');
    expect((err as GatewayError).message).toMatch(/SMTP/);
  });

  it('maps a closed port to provider_error', async () => {
    const config = configFor('carol');
    const port = await freePort();
    config.imap = { ...config.imap, port };
    config.smtp = { ...config.smtp, port };
    const err = await verifyMailbox(config).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GatewayError);
    expect((err as GatewayError).kind).toBe('provider_error');
    expect((err as GatewayError).message).toMatch(/could not be reached/);
    expect((err as GatewayError).reason).toMatch(/connection refused/);
  });
});

describe('sync', () => {
  const ACC = 'acc_alice';
  let gateway: GatewayProcess;
  let other: ImapFlow;
  /**
   * An independent IDLE on alice's INBOX: when the server's notification went out. Dovecot
   * batches change notifications (about 0.5 s after delivery), so the gateway's own share of the
   * latency is measured from here.
   */
  let observer: ImapFlow;
  const existsSeen: { at: number; count: number }[] = [];
  const notifiedAt = (count: number) =>
    worker.waitFor(() => existsSeen.find((e) => e.count >= count), 10_000, `EXISTS ${count}`).then((e) => e.at);

  beforeAll(async () => {
    // Mail from before the connect is not the API's business: the baseline covers it.
    await deliverTo('alice', 'before connect');
    const { folders } = await verifyMailbox(configFor('alice'));
    worker.addAccount(ACC, configFor('alice'), baselineCursors(folders), { onlyGateway: GATEWAY_ID });
    other = await openImap(mail, 'alice');
    observer = await openImap(mail, 'alice', { autoIdleDelay: 0 });
    observer.on('exists', (ev) => existsSeen.push({ at: performance.now(), count: ev.count }));
    (await observer.getMailboxLock('INBOX', { readOnly: true })).release();
    gateway = startGateway();
  });

  afterAll(async () => {
    await other?.logout().catch(() => undefined);
    await observer?.logout().catch(() => undefined);
  });

  it('leases the account at startup, reports the folders with their roles, then running', async () => {
    await waitForStatus(ACC, 'running');
    const folders = worker.changesOf(ACC, 'folders')[0]!.change.folders;
    const uses = Object.fromEntries(folders.map((f) => [f.path, f.special_use]));
    expect(uses).toMatchObject({
      INBOX: '\\Inbox',
      Sent: '\\Sent',
      Drafts: '\\Drafts',
      Trash: '\\Trash',
      Junk: '\\Junk',
      Archive: '\\Archive',
    });
    // Nothing before the baseline is relayed, and the cursors stay where the Worker put them.
    expect(messagesOf(ACC)).toHaveLength(0);
    const inbox = worker.accounts.get(ACC)!.cursors.get('INBOX')!;
    expect(inbox.last_uid).toBe(1);
  });

  /** The gateway's own measure, from its debug log: IDLE notification received -> batch acknowledged. */
  function relayLatencies(g: GatewayProcess): number[] {
    return g.logs.flatMap((line) => {
      const entry = JSON.parse(line) as { msg?: string; path?: string; since_notify_ms?: number };
      return entry.msg === 'relayed new mail' && entry.path === 'INBOX' && entry.since_notify_ms !== undefined
        ? [entry.since_notify_ms]
        : [];
    });
  }

  it('relays a delivered message right after IDLE reports it', async () => {
    const count = (observer.mailbox ? observer.mailbox.exists : 0) + 1;
    const before = performance.now();
    await deliverTo('alice', 'hello 1');
    const delivered = performance.now();
    const logged = relayLatencies(gateway).length;
    const message = await waitForMessage(ACC, 'hello 1', 5_000);
    const notified = await notifiedAt(count);
    // The gateway logs after the Worker's answer; give the line a moment to arrive.
    for (let i = 0; i < 100 && relayLatencies(gateway).length === logged; i++)
      await new Promise((r) => setTimeout(r, 10));
    console.log(
      `[latency] deliver() returned -> messages change: ${(message.at - delivered).toFixed(1)} ms; ` +
        `observer's IDLE notification -> change: ${(message.at - notified).toFixed(1)} ms; ` +
        `gateway log, notification -> acknowledged: ${relayLatencies(gateway).at(-1)} ms (SMTP submit -> change: ${(message.at - before).toFixed(1)} ms)`,
    );
    expect(message.path).toBe('INBOX');
    // Timings are printed, not asserted: the latency targets live in `npm run bench latency`.
    expect(message.flags).toEqual([]);
    expect(message.size).toBe(Buffer.from(message.raw, 'base64').length);
    expect(worker.accounts.get(ACC)!.cursors.get('INBOX')!.last_uid).toBe(message.uid);
  });

  it('keeps up with a steady stream of deliveries', async () => {
    const subjects = Array.from({ length: 30 }, (_, i) => `stream ${i}`);
    const delays: number[] = [];
    for (const subject of subjects) {
      await deliverTo('alice', subject);
      const delivered = performance.now();
      // Do not wait for it: the next delivery goes out at once, the delay is measured afterwards.
      void waitForMessage(ACC, subject).then((m) => delays.push(m.at - delivered));
    }
    await worker.waitFor(() => delays.length === subjects.length, 20_000, 'every streamed message');
    const stats = (xs: number[]) => {
      const sorted = [...xs].sort((a, b) => a - b);
      return { p50: sorted[Math.floor(sorted.length / 2)]!, max: sorted[sorted.length - 1]! };
    };
    const total = stats(delays);
    // The gateway's own measure: notification received -> batch acknowledged by the Worker.
    // Dovecot batches notifications, so one pass usually carries several of these messages.
    const passes = relayLatencies(gateway).slice(-subjects.length);
    const logged = stats(passes);
    console.log(
      `[latency] ${delays.length} back-to-back deliveries: deliver() -> change p50 ${total.p50.toFixed(1)} ms, max ${total.max.toFixed(1)} ms; ` +
        `gateway log, notification -> acknowledged p50 ${logged.p50} ms, max ${logged.max} ms (last ${passes.length} passes)`,
    );
    // Timings are printed, not asserted: the latency targets live in `npm run bench latency`.
    // Each message exactly once.
    const uids = messagesOf(ACC, 'INBOX').map((m) => m.uid);
    expect(new Set(uids).size).toBe(uids.length);
  });

  it('relays a flag change made by another client', async () => {
    const target = messagesOf(ACC).find((m) => m.subject === 'hello 1')!;
    await other.mailboxOpen('INBOX');
    const started = performance.now();
    await other.messageFlagsAdd(String(target.uid), ['\\Flagged', '\\Seen'], { uid: true });
    const update = await worker.waitFor(
      () =>
        worker
          .changesOf(ACC, 'flags')
          .flatMap((c) => c.change.updates.map((u) => ({ ...u, at: c.at })))
          .find((u) => u.uid === target.uid && u.flags.includes('\\Flagged')),
      5_000,
      'flags change',
    );
    console.log(`[latency] STORE -> flags change: ${(update.at - started).toFixed(1)} ms`);
    expect(update.flags).toEqual(['\\Flagged', '\\Seen']);
  });

  it('reports a move to Archive as the Archive copy before the INBOX vanish', async () => {
    await deliverTo('alice', 'to be archived');
    const original = await waitForMessage(ACC, 'to be archived');
    await other.mailboxOpen('INBOX');
    await other.messageMove(String(original.uid), 'Archive', { uid: true });
    const vanished = await waitForVanished(ACC, 'INBOX', original.uid, 5_000);
    const copy = messagesOf(ACC, 'Archive').find((m) => m.subject === 'to be archived');
    expect(copy, 'Archive copy reported').toBeDefined();
    expect(worker.changes.indexOf(copy!.record)).toBeLessThan(worker.changes.indexOf(vanished));
  });

  it('reports an expunge as vanished', async () => {
    await deliverTo('alice', 'to be deleted');
    const message = await waitForMessage(ACC, 'to be deleted');
    await other.mailboxOpen('INBOX');
    await other.messageDelete(String(message.uid), { uid: true });
    await waitForVanished(ACC, 'INBOX', message.uid, 5_000);
  });

  it('reports a new folder and the mail appended to it', async () => {
    await other.mailboxCreate('Projects');
    await other.append(
      'Projects',
      'From: a@remote.test\r\nTo: alice@example.test\r\nSubject: in projects\r\n\r\nhi\r\n',
      ['\\Seen'],
    );
    const folders = await worker.waitFor(
      () => worker.changesOf(ACC, 'folders').find((c) => c.change.folders.some((f) => f.path === 'Projects')),
      10_000,
      'folders change with Projects',
    );
    const message = await waitForMessage(ACC, 'in projects');
    expect(message.path).toBe('Projects');
    expect(message.flags).toEqual(['\\Seen']);
    expect(worker.changes.indexOf(folders)).toBeLessThan(worker.changes.indexOf(message.record));
  });

  it('resumes from the cursors after a restart without re-sending anything', async () => {
    expect(await gateway.stop('SIGTERM')).toBe(0);
    const known = new Set(messagesOf(ACC).map((m) => `${m.path}/${m.uid}`));
    const mark = worker.changes.length;
    await deliverTo('alice', 'while stopped');
    const statusMark = worker.statuses.length;
    gateway = startGateway();
    await waitForStatus(ACC, 'running', statusMark);
    await waitForMessage(ACC, 'while stopped');
    await deliverTo('alice', 'after restart');
    await waitForMessage(ACC, 'after restart');
    const resent = messageKeys(worker.changes.slice(mark));
    expect(resent.filter((key) => known.has(key))).toEqual([]);
    expect(new Set(resent).size).toBe(resent.length);
  });

  it('survives kill -9: the next process resumes with nothing lost or duplicated', async () => {
    await deliverTo('alice', 'before kill');
    await waitForMessage(ACC, 'before kill');
    await gateway.stop('SIGKILL');
    const mark = worker.changes.length;
    const known = new Set(messagesOf(ACC).map((m) => `${m.path}/${m.uid}`));
    await deliverTo('alice', 'while killed');
    const statusMark = worker.statuses.length;
    gateway = startGateway();
    await waitForStatus(ACC, 'running', statusMark);
    await waitForMessage(ACC, 'while killed');
    const resent = messageKeys(worker.changes.slice(mark));
    expect(resent.filter((key) => known.has(key))).toEqual([]);
  });

  it('reports disconnected while Dovecot is down, then running, and relays what arrived meanwhile', async () => {
    const mark = worker.statuses.length;
    await mail.stopDovecot();
    await waitForStatus(ACC, 'disconnected', mark);
    // Postfix defers it until Dovecot is back.
    await deliverTo('alice', 'during outage', { wait: false });
    await mail.startDovecot();
    await waitForStatus(ACC, 'running', mark);
    await waitForMessage(ACC, 'during outage', 20_000);
    const after = worker.statuses
      .slice(mark)
      .filter((s) => s.accountId === ACC)
      .map((s) => s.status);
    expect(after).toEqual(['disconnected', 'running']);
  });

  it('stops an account whose lease was taken over, and takes it back once that lease lapses', async () => {
    worker.steal(ACC);
    await deliverTo('alice', 'while stolen');
    // The other holder never renews: after its TTL (3 s) the account is claimable again.
    const message = await waitForMessage(ACC, 'while stolen', 15_000);
    expect(message.record.gatewayId).toBe(GATEWAY_ID);
    expect(gateway.logs.some((l) => /lease lost|stopping account/.test(l))).toBe(true);
  });
});

describe('sync without QRESYNC and CONDSTORE (snapshots, full flag fetches)', () => {
  const ACC = 'acc_carol_basic';
  let other: ImapFlow;

  beforeAll(async () => {
    const { folders } = await verifyMailbox(configFor('carol'));
    worker.addAccount(ACC, configFor('carol'), baselineCursors(folders), { onlyGateway: 'gw-basic' });
    other = await openImap(mail, 'carol');
    startGateway({ GATEWAY_ID: 'gw-basic', GATEWAY_IMAP_QRESYNC: '0', GATEWAY_IMAP_CONDSTORE: '0' });
    await waitForStatus(ACC, 'running');
  });

  afterAll(async () => {
    await other?.logout().catch(() => undefined);
  });

  it('relays new mail, flag changes, moves (copy first) and expunges', async () => {
    await deliverTo('carol', 'basic 1');
    await deliverTo('carol', 'basic 2');
    const first = await waitForMessage(ACC, 'basic 1');
    const second = await waitForMessage(ACC, 'basic 2');

    await other.mailboxOpen('INBOX');
    await other.messageFlagsAdd(String(first.uid), ['\\Flagged'], { uid: true });
    const flagged = await worker.waitFor(
      () =>
        worker
          .changesOf(ACC, 'flags')
          .flatMap((c) => c.change.updates)
          .find((u) => u.uid === first.uid && u.flags.includes('\\Flagged')),
      10_000,
      'flags change',
    );
    expect(flagged.flags).toEqual(['\\Flagged']);

    const snapshotWithout = (uid: number, after: number) =>
      worker.waitFor(
        () =>
          worker
            .changesOf(ACC, 'snapshot')
            .find(
              (c) => worker.changes.indexOf(c) >= after && c.change.path === 'INBOX' && !c.change.uids.includes(uid),
            ),
        10_000,
        `snapshot without ${uid}`,
      );
    let mark = worker.changes.length;
    await other.messageMove(String(first.uid), 'Archive', { uid: true });
    const afterMove = await snapshotWithout(first.uid, mark);
    const copy = messagesOf(ACC, 'Archive').find((m) => m.subject === 'basic 1');
    expect(copy, 'Archive copy reported').toBeDefined();
    expect(worker.changes.indexOf(copy!.record)).toBeLessThan(worker.changes.indexOf(afterMove));
    expect(afterMove.change.uids).toContain(second.uid);

    await other.mailboxOpen('INBOX');
    mark = worker.changes.length;
    await other.messageDelete(String(second.uid), { uid: true });
    await snapshotWithout(second.uid, mark);
    expect(worker.changesOf(ACC, 'vanished')).toEqual([]);
  });
});

describe('a server without MOVE (another client moves with COPY, then EXPUNGE)', () => {
  const ACC = 'acc_alice_nomove';
  /** Longer than the pause below, which holds several polls: the gateway waits this long for an expunge. */
  const SETTLE_MS = 5_000;
  let noMove: MailServer;
  let other: ImapFlow;

  beforeAll(async () => {
    noMove = await startMailServer({ users: ['alice'], withoutCapabilities: ['MOVE'] });
    other = await openImap(noMove, 'alice');
    // The folders as the gateway lists them (verify here would need this server's CA in this process).
    const folders = await listFolders(other);
    worker.addAccount(ACC, configFor('alice', undefined, noMove), baselineCursors(folders), {
      onlyGateway: 'gw-nomove',
    });
    startGateway({
      GATEWAY_ID: 'gw-nomove',
      NODE_EXTRA_CA_CERTS: noMove.caFile,
      GATEWAY_MOVE_SETTLE_MS: String(SETTLE_MS),
    });
    await waitForStatus(ACC, 'running');
  }, 60_000);

  afterAll(async () => {
    await other?.logout().catch(() => undefined);
    await noMove?.stop();
  });

  it('relays the copy together with the expunge to come, even when polls ran between the two', async () => {
    await other.append('INBOX', `Subject: moved slowly\r\nMessage-ID: <slow-move@remote.test>\r\n\r\nbody\r\n`);
    const original = await waitForMessage(ACC, 'moved slowly');
    expect(original.path).toBe('INBOX');
    await other.mailboxOpen('INBOX');
    await other.messageCopy(String(original.uid), 'Archive', { uid: true });
    // Polls every 500 ms meanwhile: each sees the copy in Archive, and INBOX still holding the message.
    await new Promise((r) => setTimeout(r, 1_500));
    await other.messageDelete(String(original.uid), { uid: true });
    const copy = await worker.waitFor(
      () => messagesOf(ACC, 'Archive').find((m) => m.subject === 'moved slowly'),
      20_000,
      'the Archive copy',
    );
    // Relayed with the INBOX expunge as `vanishing`, the Worker's sign that the copy is the same
    // email moving (not a second email, then a delete).
    expect(copy.record.change.type === 'messages' && copy.record.change.vanishing).toEqual([
      { path: 'INBOX', uidvalidity: expect.any(Number), uids: [original.uid] },
    ]);
    const vanished = await waitForVanished(ACC, 'INBOX', original.uid, 10_000);
    expect(worker.changes.indexOf(copy.record)).toBeLessThan(worker.changes.indexOf(vanished));
  });
});

describe('new mail while a poll holds the IDLE connection', () => {
  const ACC = 'acc_bob_poll';
  const GATEWAY = 'gw-poll';
  let proxy: ImapProxy;
  let gateway: GatewayProcess;

  beforeAll(async () => {
    // Plain text through a proxy that sees the gateway's commands and can hold one back.
    proxy = await imapProxy(mail.imapPlainPort);
    const config = configFor('bob');
    config.imap = { ...config.imap, port: proxy.port, encryption: 'NONE' };
    const { folders } = await verifyMailbox(configFor('bob'));
    worker.addAccount(ACC, config, baselineCursors(folders), { onlyGateway: GATEWAY });
    gateway = startGateway({ GATEWAY_ID: GATEWAY });
    await waitForStatus(ACC, 'running');
  });

  afterAll(async () => {
    await gateway?.stop();
    proxy?.close();
  });

  it("fetches a message saved during the poll from the poll's own answer, before going back to IDLE", async () => {
    // The poll leaves IDLE (DONE) for its commands (a pass would begin with STATUS): its first one is
    // held while a message is saved, so the server has no IDLE to push it to. Only the poll's own
    // commands can find it before the connection goes back to IDLE.
    const poll = await proxy.holdNext((line, previous) => previous === 'DONE' && /^\S+ (NOOP|LIST)\b/i.test(line));
    await deliverTo('bob', 'during a poll');
    const mark = poll.connection.sent.length;
    poll.release();
    const message = await waitForMessage(ACC, 'during a poll');
    expect(message.path).toBe('INBOX');
    const after = poll.connection.sent.slice(mark);
    const fetched = after.findIndex((line) => /^\S+ UID FETCH /i.test(line));
    const idled = after.findIndex((line) => /^\S+ IDLE$/i.test(line));
    expect(fetched, `the gateway's commands from the poll's first on: ${after.join(' | ')}`).toBeGreaterThan(0);
    expect(
      idled === -1 || fetched < idled,
      `the gateway's commands from the poll's first on: ${after.join(' | ')}`,
    ).toBe(true);
  });
});

describe('errors', () => {
  it('reports errored (once) when the server refuses the credentials', async () => {
    const ACC = 'acc_bob_wrong';
    worker.addAccount(ACC, configFor('bob', 'not-the-password'), [], { onlyGateway: 'gw-errors' });
    startGateway({ GATEWAY_ID: 'gw-errors' });
    const status = await waitForStatus(ACC, 'errored');
    expect(status.error).toMatch(/login failed/);
    expect(status.error).not.toContain('not-the-password');
  });

  it('retries ever more slowly a session that dies right after it starts', { timeout: 60_000 }, async () => {
    // Every connection through this proxy is cut 3 s after it opens: sessions start, then die.
    const proxy = createServer((client) => {
      const server = tcpConnect(mail.imapPort, '127.0.0.1');
      client.pipe(server).pipe(client);
      const cut = setTimeout(() => {
        client.destroy();
        server.destroy();
      }, 3_000);
      for (const socket of [client, server]) socket.on('error', () => {}).on('close', () => clearTimeout(cut));
    });
    const port = await freePort();
    await new Promise<void>((resolve) => proxy.listen(port, '127.0.0.1', resolve));
    try {
      const ACC = 'acc_alice_flaky';
      const config = configFor('alice');
      worker.addAccount(ACC, { ...config, imap: { ...config.imap, port } }, [], { onlyGateway: 'gw-flaky' });
      const gateway = startGateway({
        GATEWAY_ID: 'gw-flaky',
        GATEWAY_RECONNECT_MIN_MS: '250',
        GATEWAY_RECONNECT_MAX_MS: '60000',
      });
      const ended = () => gateway.logs.filter((l) => l.includes('session ended')).map((l) => JSON.parse(l));
      await worker.waitFor(() => ended().length >= 4, 45_000, 'four ended sessions');
      const started = gateway.logs.filter((l) => l.includes('"synced"')).length;
      expect(started).toBeGreaterThanOrEqual(4);
      // 250 ms doubling (with jitter, half to all of it): the fourth retry waits at least 1 s. Before,
      // every session that had started reset the backoff, and each retry came within 250 ms.
      const delays = ended().map((e) => e.retry_in_ms as number);
      expect(delays[3]).toBeGreaterThanOrEqual(1_000);
    } finally {
      proxy.close();
    }
  });

  it('exits with a clear message when required environment is missing', async () => {
    const proc = spawn(process.execPath, ['gateway/main.ts'], {
      cwd: root,
      env: { PATH: process.env.PATH },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise((resolve) => proc.once('exit', resolve));
    expect(code).toBe(1);
    expect(stderr).toMatch(/missing required environment: WORKER_URL, GATEWAY_SECRET/);
  });
});
