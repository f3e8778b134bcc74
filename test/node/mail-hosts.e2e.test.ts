// End to end with ALLOW_PRIVATE_MAIL_HOSTS off in the Worker and in the gateway: mail hosts are
// judged by the address their name resolves to, through the system resolver (/etc/hosts entries
// this test writes and changes), at the auth intent and at every later connect.
//
// The later connect needs an allowed address that reaches the test Dovecot and Postfix (they listen
// on 127.0.0.1 only): the test adds a TEST-NET-2 address to the loopback interface and forwards its
// mail ports to 127.0.0.1. Both need root (CI runs tests as root); without it the tests are skipped.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, openSync, readFileSync, writeFileSync, writeSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startMailServer, type MailServer } from '../mailserver/mailserver.ts';
import { connectMailbox, mailboxIntent } from './connect.ts';
import { dumpLogsOnFailure, eventually, startService, type GatewayProcess, type Service } from './service.ts';

const HOSTS = '/etc/hosts';
const tag = randomBytes(4).toString('hex');
/** On the test certificate (DNS:mail.<domain>), so TLS verifies wherever the name points. */
const DOMAIN = `hosts-${tag}.test`;
const NAME = `mail.${DOMAIN}`;
const PRIVATE_NAME = `mail-private-${tag}.test`;
/** TEST-NET-2: allowed by the rule, routed nowhere; this test puts it on the loopback interface. */
const PUBLIC = `198.51.100.${2 + (parseInt(tag.slice(0, 2), 16) % 250)}`;
/** Addresses are written padded to this width, so that changing one rewrites its line in place. */
const WIDTH = 15;

/** Our /etc/hosts lines, by name: where each address starts in the file. */
const entries = new Map<string, number>();

function addHost(name: string, address: string): void {
  const at = readFileSync(HOSTS).length;
  const fd = openSync(HOSTS, 'a');
  try {
    const prefix = at > 0 && readFileSync(HOSTS, 'utf8').endsWith('\n') ? '' : '\n';
    writeSync(fd, `${prefix}${address.padEnd(WIDTH)} ${name}\n`);
    entries.set(name, at + prefix.length);
  } finally {
    closeSync(fd);
  }
}

/** Points a name elsewhere without ever truncating the file (other processes read it meanwhile). */
function setHost(name: string, address: string): void {
  const fd = openSync(HOSTS, 'r+');
  try {
    writeSync(fd, address.padEnd(WIDTH), entries.get(name)!);
  } finally {
    closeSync(fd);
  }
}

/** Why these tests cannot run here, or null: they write /etc/hosts and add an address to `lo`. */
function setupProblem(): string | null {
  try {
    addHost(PRIVATE_NAME, '127.0.0.1');
    addHost(NAME, PUBLIC);
  } catch (err) {
    return `${HOSTS} is not writable (${(err as Error).message}): the tests need root`;
  }
  const ip = spawnSync('ip', ['addr', 'add', `${PUBLIC}/32`, 'dev', 'lo'], { encoding: 'utf8' });
  if (ip.status !== 0) return `cannot add ${PUBLIC} to lo (${ip.error?.message ?? ip.stderr.trim()}): needs root`;
  return null;
}

const problem = setupProblem();
if (problem) console.warn(`mail-hosts.e2e: skipped: ${problem}`);

/** Forwards PUBLIC:port to 127.0.0.1:port, as a mail server at a public address would answer. */
class Forwarder {
  #servers: Server[] = [];
  readonly #sockets = new Set<Socket>();
  readonly #ports: number[];
  constructor(ports: number[]) {
    this.#ports = ports;
  }

  async open(): Promise<void> {
    this.#servers = await Promise.all(
      this.#ports.map(
        (port) =>
          new Promise<Server>((resolve, reject) => {
            const server = createServer((inbound) => {
              const outbound = connect(port, '127.0.0.1');
              for (const s of [inbound, outbound]) {
                this.#sockets.add(s);
                s.on('error', () => {});
                s.on('close', () => {
                  this.#sockets.delete(s);
                  inbound.destroy();
                  outbound.destroy();
                });
              }
              inbound.pipe(outbound).pipe(inbound);
            });
            server.once('error', reject);
            server.listen(port, PUBLIC, () => resolve(server));
          }),
      ),
    );
  }

  /** Cuts every forwarded connection (the account's session ends and the gateway connects again). */
  cut(): void {
    for (const s of this.#sockets) s.destroy();
  }

  /** Stops listening too: the port at PUBLIC is closed. */
  async close(): Promise<void> {
    const closing = this.#servers.map((s) => new Promise((r) => s.close(r)));
    this.#servers = [];
    this.cut();
    await Promise.all(closing);
  }
}

let mail: MailServer;
let service: Service;
let gateway: GatewayProcess;
let forwarder: Forwarder;

afterAll(async () => {
  await forwarder?.close();
  await service?.stop();
  await mail?.stop();
  spawnSync('ip', ['addr', 'del', `${PUBLIC}/32`, 'dev', 'lo']);
  const lines = readFileSync(HOSTS, 'utf8').split('\n');
  const ours = new Set(entries.keys());
  writeFileSync(HOSTS, lines.filter((l) => !ours.has(l.trim().split(/\s+/)[1] ?? '')).join('\n'));
});

describe.skipIf(problem !== null)('mail hosts with ALLOW_PRIVATE_MAIL_HOSTS off', () => {
  beforeAll(async () => {
    mail = await startMailServer({ domain: DOMAIN });
    service = await startService({ workerEnv: { ALLOW_PRIVATE_MAIL_HOSTS: 'false' } });
    gateway = service.startGateway('gw-hosts', {
      NODE_EXTRA_CA_CERTS: mail.caFile,
      ALLOW_PRIVATE_MAIL_HOSTS: 'false',
      GATEWAY_RECONNECT_MIN_MS: '200',
      GATEWAY_RECONNECT_MAX_MS: '500',
    });
    forwarder = new Forwarder([mail.imapPort, mail.smtpPort]);
    await forwarder.open();
    await eventually(() => service.query("SELECT id FROM gateways WHERE id = 'gw-hosts' AND connected = 1")[0], {
      what: 'the gateway connected',
      timeoutMs: 60_000,
    });
  }, 240_000);
  afterEach((ctx) => dumpLogsOnFailure(ctx, service));

  it('refuses an auth intent naming a host that resolves to 127.0.0.1 exactly like 127.0.0.1 itself', async () => {
    // The other host is the allowed name, so that only the one under test is private.
    const intent = (which: 'imap' | 'smtp', host: string) =>
      service.api(
        'POST',
        '/auth/intent',
        mailboxIntent(mail, 'alice', { imap_host: NAME, smtp_host: NAME, [`${which}_host`]: host }),
      );
    for (const which of ['imap', 'smtp'] as const) {
      const literal = await intent(which, '127.0.0.1'); // refused by the Worker, as written
      expect(literal.status).toBe(400);
      expect(literal.body.detail).toBe(
        `${which}_host: must be a public host, not a private, loopback or link-local address`,
      );
      const byName = await intent(which, PRIVATE_NAME); // refused by the gateway, by its address
      expect(byName.body).toEqual(literal.body);
    }
    expect(service.query('SELECT id FROM accounts')).toEqual([]);
  }, 60_000);

  it('refuses a name that turns to 127.0.0.1 at a later connect, with the last_error of a closed port', async () => {
    const account = await connectMailbox(service, mail, 'alice', { imap_host: NAME, smtp_host: NAME });
    const status = async () => (await service.api('GET', `/accounts/${account.id}`)).body;
    const becomes = (wanted: string) =>
      eventually(async () => ((await status()).status === wanted ? status() : null), {
        what: `status ${wanted}`,
        timeoutMs: 60_000,
        intervalMs: 200,
      });
    await becomes('running');
    // The row says running from the connect on; wait for the gateway's own session to say so too, so
    // that what follows is the failure of a later connect, not of the first.
    await eventually(
      () =>
        gateway.log.some(
          (l) => l.includes('"msg":"status"') && l.includes(account.id) && l.includes('"status":"running"'),
        ) || null,
      { what: "the gateway's session running", timeoutMs: 60_000, intervalMs: 200 },
    );

    // A closed port at the allowed address: the server cannot be reached.
    await forwarder.close();
    const closed = await becomes('disconnected');
    expect(gateway.log.join('\n')).toContain('ECONNREFUSED');

    // Back up at the allowed address: running again.
    await forwarder.open();
    expect((await becomes('running')).last_error).toBeNull();

    // The name now resolves to 127.0.0.1, where Dovecot's port is open. A new gateway process
    // leases the account and connects afresh: refused at that connect, and reported as it is.
    await gateway.kill('SIGTERM');
    setHost(NAME, '127.0.0.1');
    const next = service.startGateway('gw-hosts-2', {
      NODE_EXTRA_CA_CERTS: mail.caFile,
      ALLOW_PRIVATE_MAIL_HOSTS: 'false',
    });
    const refused = await becomes('disconnected');
    expect(next.log.join('\n')).toContain(`${NAME} resolves to 127.0.0.1, a private address`);
    expect(next.log.join('\n')).not.toContain('"status":"running"');

    // The same last_error whether the port was open (and refused by the rule) or closed.
    expect(refused.last_error).toBe(`IMAP ${NAME}:${mail.imapPort}: the server could not be reached`);
    expect(refused.last_error).toBe(closed.last_error);
  }, 180_000);
});
