/**
 * A real Dovecot (IMAP + LMTP) and a real Postfix (SMTP) on 127.0.0.1 for
 * tests and benchmarks, owned by the calling process:
 *
 *  - all configs, certificates, queue, mail and logs live in one temp dir;
 *    nothing under /etc is changed or used as configuration (Debian's
 *    packages only provide the binaries and the system users), no systemd;
 *  - Dovecot runs as `dovecot -F -c <conf>` and Postfix as
 *    `master -c <dir> -s`, both children of this process;
 *  - ports are picked dynamically (or from MAILSERVER_*_PORT env vars), so
 *    several servers can run side by side in different test processes.
 *
 * Mail flow:
 *   mxPort (no auth) ─┐
 *   smtpPort/smtpsPort (AUTH via Dovecot SASL) ─┴─> Postfix ──LMTP (unix socket)──> Dovecot ──> maildir
 * Mail submitted by users to non-local domains is delivered to the `sink`
 * mailbox instead of leaving the machine.
 *
 * Requires root (Postfix and Dovecot drop privileges themselves).
 */
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { ensureDebianPackages } from '../shared/debian.ts';
import {
  deliver as deliverVia,
  layout,
  type DeliverOptions,
  type DeliverResult,
  type MailServerInfo,
  type MailUser,
} from './client.ts';
import {
  installExitHooks,
  killGroup,
  live,
  lookupId,
  PortInUseError,
  run,
  spawnOwned,
  stopChild,
  waitUntilReady,
} from './processes.ts';

export type { MailUser, MailServerInfo, DeliverOptions, DeliverResult } from './client.ts';

const t0 = Date.now();
/** MAILSERVER_DEBUG=1 prints startup steps with timings. */
const debug = (msg: string) => {
  if (process.env.MAILSERVER_DEBUG) console.error(`[mailserver +${Date.now() - t0}ms] ${msg}`);
};

export interface MailServer extends MailServerInfo {
  /** Deliver TO local users via the MX port (see client.ts `deliver`). Waits for final delivery unless `wait: false`. */
  deliver(opts: DeliverOptions): Promise<DeliverResult>;
  /** Stop Dovecot (IMAP + LMTP); mail, ports and Postfix stay. Postfix defers deliveries meanwhile. */
  stopDovecot(): Promise<void>;
  /** Start Dovecot again on the same ports with the same mail; also asks Postfix to retry deferred mail. */
  startDovecot(): Promise<void>;
  /** Stop everything and remove the temp dir (unless MAILSERVER_KEEP=1). Idempotent. */
  stop(): Promise<void>;
  /** Run `doveadm` against this Dovecot (e.g. `['mailbox', 'update', '--uid-validity', '7', '-u', 'alice', 'INBOX']`); returns stdout. */
  doveadm(args: string[]): Promise<string>;
  /** The maildir directory of a user's folder (INBOX is the maildir root), for tests that break it on purpose. */
  maildirOf(user: string, folder: string): string;
  /** The JSON-serialisable part (what global-setup provides to tests). */
  info(): MailServerInfo;
  /** The server certificate and its key (signed by `caFile`), for other test servers (Courier, Cyrus). */
  tls: { ca: string; cert: string; key: string };
}

export interface StartOptions {
  /** Local parts of the users to create (default alice, bob, carol, dave, erin). */
  users?: string[];
  /** Mail domain (default example.test). */
  domain?: string;
  /** Keep the temp dir after stop() (also MAILSERVER_KEEP=1). */
  keep?: boolean;
  /**
   * IMAP capabilities Dovecot must not offer after login, e.g. `['CONDSTORE', 'QRESYNC']` for a server
   * without them. Dovecot only stops announcing them; a client that uses them anyway is not refused.
   */
  withoutCapabilities?: string[];
  /**
   * For many connections at once (benchmarks): IMAP connections the server accepts in all (default
   * 1,000, one process each). Above the default, each IMAP process serves up to 10 connections
   * (Dovecot's client_limit), so a thousand accounts do not cost thousands of processes.
   */
  maxImapConnections?: number;
}

/** What Dovecot 2.3.19 offers after login with this configuration (checked by mailserver.test.ts). */
export const DOVECOT_CAPABILITIES =
  'IMAP4rev1 SASL-IR LOGIN-REFERRALS ID ENABLE IDLE SORT SORT=DISPLAY THREAD=REFERENCES THREAD=REFS THREAD=ORDEREDSUBJECT MULTIAPPEND URL-PARTIAL CATENATE UNSELECT CHILDREN NAMESPACE UIDPLUS LIST-EXTENDED I18NLEVEL=1 CONDSTORE QRESYNC ESEARCH ESORT SEARCHRES WITHIN CONTEXT=SEARCH LIST-STATUS BINARY MOVE SNIPPET=FUZZY PREVIEW=FUZZY PREVIEW STATUS=SIZE SAVEDATE LITERAL+ NOTIFY SPECIAL-USE'.split(
    ' ',
  );

export const DEFAULT_USERS = ['alice', 'bob', 'carol', 'dave', 'erin'];
/** Deterministic so tests and docs can use them: `alice` -> `alice-password`. */
export const passwordFor = (name: string): string => `${name}-password`;

const DOVECOT = '/usr/sbin/dovecot';
const POSTFIX = '/usr/sbin/postfix';
const POSTFIX_MASTER = '/usr/lib/postfix/sbin/master';
const REQUIRED_BINARIES = [DOVECOT, '/usr/lib/dovecot/imap', '/usr/lib/dovecot/lmtp', POSTFIX, POSTFIX_MASTER];

/**
 * Install Dovecot and Postfix from Debian if any binary is missing.
 * Postfix is installed with debconf's "No configuration" so the system
 * instance stays unconfigured; policy-rc.d/no systemd means nothing starts.
 */
export async function ensureMailPackages(): Promise<void> {
  await ensureDebianPackages(REQUIRED_BINARIES, ['dovecot-imapd', 'dovecot-lmtpd', 'postfix'], (env) =>
    run('sh', ['-c', 'echo "postfix postfix/main_mailer_type select No configuration" | debconf-set-selections'], {
      env,
    }).then(() => undefined),
  );
}

interface Ports {
  imapPort: number;
  imapPlainPort: number;
  imapSoloPort: number;
  smtpPort: number;
  smtpsPort: number;
  mxPort: number;
}

const PORT_ENV: Record<keyof Ports, string> = {
  imapPort: 'MAILSERVER_IMAPS_PORT',
  imapPlainPort: 'MAILSERVER_IMAP_PORT',
  imapSoloPort: 'MAILSERVER_IMAP_SOLO_PORT',
  smtpPort: 'MAILSERVER_SUBMISSION_PORT',
  smtpsPort: 'MAILSERVER_SMTPS_PORT',
  mxPort: 'MAILSERVER_MX_PORT',
};

export async function startMailServer(opts: StartOptions = {}): Promise<MailServer> {
  await ensureMailPackages();
  if (process.getuid?.() !== 0) throw new Error('the test mail server must run as root (Postfix/Dovecot need it)');

  const pinned = Object.values(PORT_ENV).some((k) => process.env[k]);
  // Free ports are found by binding to port 0 and releasing them, so another
  // process could grab one before Dovecot/Postfix bind it: retry with fresh ones.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(opts, await choosePorts());
    } catch (err) {
      if (pinned || attempt >= 3 || !(err instanceof PortInUseError)) throw err;
    }
  }
}

async function choosePorts(): Promise<Ports> {
  const ports = {} as Ports;
  const held: net.Server[] = [];
  try {
    for (const key of Object.keys(PORT_ENV) as (keyof Ports)[]) {
      const fromEnv = Number(process.env[PORT_ENV[key]]);
      if (fromEnv > 0) {
        ports[key] = fromEnv;
        continue;
      }
      // Keep each probe socket open until all are chosen so we get 5 distinct ports.
      const srv = net.createServer();
      await new Promise<void>((resolve, reject) => {
        srv.once('error', reject);
        srv.listen(0, '127.0.0.1', resolve);
      });
      held.push(srv);
      ports[key] = (srv.address() as net.AddressInfo).port;
    }
  } finally {
    await Promise.all(held.map((s) => new Promise((r) => s.close(r))));
  }
  return ports;
}

async function startOnce(opts: StartOptions, ports: Ports): Promise<MailServer> {
  const domain = opts.domain ?? 'example.test';
  const keep = opts.keep ?? process.env.MAILSERVER_KEEP === '1';
  const mkUser = (name: string): MailUser => ({ user: name, email: `${name}@${domain}`, password: passwordFor(name) });
  const users = (opts.users ?? DEFAULT_USERS).map((n) => mkUser(n.toLowerCase()));
  const sink = mkUser('sink');
  for (const u of users) {
    if (!/^[a-z0-9][a-z0-9._-]*$/.test(u.user) || u.user === sink.user)
      throw new Error(`invalid test user name: ${u.user}`);
  }
  if (!/^[a-z0-9.-]+$/.test(domain)) throw new Error(`invalid test domain: ${domain}`);
  const mailUid = lookupId('/etc/passwd', 'mail');
  const mailGid = lookupId('/etc/group', 'mail');

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mailserver-'));
  // Postfix and Dovecot children run as postfix/dovecot/dovenull/mail and must traverse it.
  fs.chmodSync(dir, 0o755);

  const { caFile, postfixLog, dovecotLog } = layout(dir);
  const info: MailServerInfo = {
    host: '127.0.0.1',
    ...ports,
    caFile,
    domain,
    users,
    sink,
    dir,
    postfixLog,
    dovecotLog,
  };

  const d = {
    root: path.join(dir, 'dovecot'),
    run: path.join(dir, 'dovecot', 'run'),
    conf: path.join(dir, 'dovecot', 'dovecot.conf'),
    users: path.join(dir, 'dovecot', 'users'),
  };
  const p = {
    conf: path.join(dir, 'postfix', 'etc'),
    queue: path.join(dir, 'postfix', 'queue'),
    data: path.join(dir, 'postfix', 'data'),
  };
  const mailRoot = path.join(dir, 'mail');
  let dovecot: ChildProcess | undefined;
  let postfix: ChildProcess | undefined;
  let stopped = false;

  const killAllSync = () => {
    for (const child of [postfix, dovecot]) killGroup(child, 'SIGKILL');
    if (!keep) fs.rmSync(dir, { recursive: true, force: true, maxRetries: 5 });
  };

  try {
    debug(`dir ${dir}`);
    for (const x of [d.root, p.conf, p.queue, p.data, mailRoot, path.join(dir, 'tls')])
      fs.mkdirSync(x, { recursive: true });
    fs.chownSync(mailRoot, mailUid, mailGid);
    const tls = await makeCertificates(path.join(dir, 'tls'), domain);

    // passwd-file: user:{scheme}password:uid:gid:gecos:home:shell
    fs.writeFileSync(
      d.users,
      [...users, sink]
        .map((u) => `${u.user}:{PLAIN}${u.password}:${mailUid}:${mailGid}::${path.join(mailRoot, u.user)}::\n`)
        .join(''),
      { mode: 0o640 },
    );
    fs.chownSync(d.users, 0, lookupId('/etc/group', 'dovecot'));
    const without = new Set((opts.withoutCapabilities ?? []).map((c) => c.toUpperCase()));
    const capabilities = without.size ? DOVECOT_CAPABILITIES.filter((c) => !without.has(c)) : undefined;
    fs.writeFileSync(
      d.conf,
      dovecotConf({
        dir,
        d,
        ports,
        tls,
        dovecotLog,
        mailUid,
        mailGid,
        domain,
        capabilities,
        maxImap: opts.maxImapConnections,
      }),
    );

    const lmtpSocket = path.join(d.run, 'lmtp');
    const authSocket = path.join(d.run, 'auth-postfix');
    fs.writeFileSync(
      path.join(p.conf, 'main.cf'),
      postfixMainCf({ p, domain, tls, postfixLog, lmtpSocket, authSocket, dir }),
    );
    fs.writeFileSync(path.join(p.conf, 'master.cf'), postfixMasterCf(ports));
    // texthash: maps need no postmap; the right-hand side is unused for validation.
    fs.writeFileSync(path.join(p.conf, 'vmailbox'), [...users, sink].map((u) => `${u.email} ok\n`).join(''));
    // Anything submitted for a non-local domain goes to the sink mailbox.
    fs.writeFileSync(
      path.join(p.conf, 'external-sink.regexp'),
      `if !/@${domain.replace(/\./g, '\\.')}$/\n/^/ ${sink.email}\nendif\n`,
    );

    const startDovecot = async () => {
      if (dovecot && dovecot.exitCode === null && dovecot.signalCode === null) return;
      dovecot = spawnOwned(DOVECOT, ['-F', '-c', d.conf], path.join(d.root, 'stderr.log'));
      const imapPorts = [ports.imapPort, ports.imapPlainPort, ports.imapSoloPort];
      await waitUntilReady({ child: dovecot, name: 'dovecot', log: dovecotLog, ports: imapPorts }, [
        ...imapPorts,
        lmtpSocket,
        authSocket,
      ]);
    };
    const stopDovecot = async () => {
      const child = dovecot;
      dovecot = undefined;
      await stopChild(child);
    };

    installExitHooks();
    live.add(killAllSync);
    debug('config written');
    await startDovecot();
    debug('dovecot ready');

    // Postfix waits (in 300 ms steps) until a config/table file is older than
    // ~1 s, against half-written files; backdate ours to skip that wait.
    const past = new Date(Date.now() - 60_000);
    for (const f of fs.readdirSync(p.conf)) fs.utimesSync(path.join(p.conf, f), past, past);
    createPostfixDirs(p.queue, p.data);
    debug('postfix dirs created');
    postfix = spawnOwned(POSTFIX_MASTER, ['-c', p.conf, '-s'], path.join(dir, 'postfix', 'stderr.log'));
    const smtpPorts = [ports.mxPort, ports.smtpPort, ports.smtpsPort];
    await waitUntilReady({ child: postfix, name: 'postfix', log: postfixLog, ports: smtpPorts }, smtpPorts);

    debug('postfix ready');

    const server: MailServer = {
      ...info,
      tls: { ca: tls.ca, cert: tls.cert, key: tls.key },
      info: () => ({ ...info, users: info.users.map((u) => ({ ...u })), sink: { ...sink } }),
      deliver: (o) => deliverVia(info, o),
      startDovecot: async () => {
        if (stopped) throw new Error('mail server stopped');
        await startDovecot();
        // Retry mail deferred while Dovecot was down now instead of after the backoff.
        await run(POSTFIX, ['-c', p.conf, 'flush']).catch(() => undefined);
      },
      stopDovecot,
      doveadm: (args) => run('doveadm', ['-c', d.conf, ...args]),
      maildirOf: (user, folder) =>
        path.join(mailRoot, user, 'Maildir', folder.toUpperCase() === 'INBOX' ? '' : `.${folder.replace(/\//g, '.')}`),
      stop: async () => {
        if (stopped) return;
        stopped = true;
        live.delete(killAllSync);
        // Dovecot's master waits 1 s for its log process on shutdown; that is most of this.
        await Promise.all([stopChild(postfix), stopDovecot()]);
        if (!keep) fs.rmSync(dir, { recursive: true, force: true, maxRetries: 5 });
        debug(`stopped ${dir}`);
      },
    };
    return server;
  } catch (err) {
    live.delete(killAllSync);
    killAllSync();
    throw err;
  }
}

// ---------------------------------------------------------------------------
// Configuration

interface TlsFiles {
  ca: string;
  cert: string;
  key: string;
}

function dovecotConf(c: {
  dir: string;
  d: { root: string; run: string; users: string };
  ports: Ports;
  tls: TlsFiles;
  dovecotLog: string;
  mailUid: number;
  mailGid: number;
  domain: string;
  capabilities: string[] | undefined;
  maxImap?: number;
}): string {
  const many = (c.maxImap ?? 0) > 1000;
  // Few clients per imap process: one process serves its clients one command at a time, so an
  // account's IDLE notification would wait behind its neighbours' polls (Dovecot's default is 1).
  const perProcess = 10;
  const imapService = many
    ? `service imap {\n  process_limit = ${Math.ceil(c.maxImap! / perProcess) + 16}\n  client_limit = ${perProcess}\n  service_count = 0\n}`
    : 'service imap {\n  process_limit = 1024\n}';
  const loginLimit = many ? c.maxImap! + 100 : 1000;
  const special = (name: string, flag: string) =>
    `  mailbox ${name} {\n    special_use = \\${flag}\n    auto = subscribe\n  }\n`;
  return `# Generated by test/mailserver/mailserver.ts — do not edit.
instance_name = mailtest-${path.basename(c.dir)}
base_dir = ${c.d.run}
state_dir = ${path.join(c.d.root, 'state')}
log_path = ${c.dovecotLog}
protocols = imap lmtp
listen = 127.0.0.1
shutdown_clients = yes

default_internal_user = dovecot
default_internal_group = dovecot
default_login_user = dovenull
first_valid_uid = ${c.mailUid}
first_valid_gid = ${c.mailGid}

ssl = yes
ssl_cert = <${c.tls.cert}
ssl_key = <${c.tls.key}
ssl_min_protocol = TLSv1.2

# Plaintext LOGIN on the STARTTLS port is fine: loopback test server.
disable_plaintext_auth = no
auth_mechanisms = plain login
# "alice" and "alice@${c.domain}" are the same account (also for LMTP recipients).
auth_username_format = %Ln
# Wrong passwords fail after ~0.5 s instead of 2 s (2.3.19 flushes delayed
# failures on a 500 ms timer, so 0 does not mean immediate), and they must not
# slow down later logins from 127.0.0.1: Dovecot's auth penalty (anvil) delays
# every auth from an IP after failures, doubling up to 15 s. Trusted networks
# skip it for IMAP; the anvil listener below disables it (also for SMTP AUTH).
auth_failure_delay = 0
login_trusted_networks = 127.0.0.0/8
auth_verbose = yes
recipient_delimiter = +

passdb {
  driver = passwd-file
  args = scheme=PLAIN ${c.d.users}
}
userdb {
  driver = passwd-file
  args = ${c.d.users}
}

mail_location = maildir:~/Maildir
# IDLE is pushed by inotify; this is only the fallback poll (e.g. when the
# per-uid inotify instance limit is exhausted by many IDLE connections).
mailbox_idle_check_interval = 1 secs
imap_idle_notify_interval = 1 mins

namespace inbox {
  inbox = yes
  separator = /
${special('Drafts', 'Drafts')}${special('Sent', 'Sent')}${special('Trash', 'Trash')}${special('Junk', 'Junk')}${special('Archive', 'Archive')}}

protocol imap {
  # Benchmarks open many connections per user from one IP (default 10).
  mail_max_userip_connections = 1000
${c.capabilities ? `  # Switched off on purpose (StartOptions.withoutCapabilities): what is left.\n  imap_capability = ${c.capabilities.join(' ')}\n` : ''}}
${many ? `default_client_limit = ${loginLimit + 1000}\n` : ''}

service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = ${c.ports.imapPlainPort}
  }
  inet_listener imaps {
    address = 127.0.0.1
    port = ${c.ports.imapPort}
    ssl = yes
  }
  # One long-lived login process handling many connections: fast logins.
  service_count = 0
  process_min_avail = 1
  client_limit = ${loginLimit}
}
${imapService}
# The solo port: IMAPS whose connections each get an imap process of their own, whatever the
# client_limit above. Dovecot 2.3 watches a folder with one inotify watch per process: of two IDLE
# connections to one folder in one process only one is pushed new mail (500 ms after delivery),
# and every IDLE that ends drops the other's watch, which then hears of it only at its
# mailbox_idle_check_interval. A client timing new mail against another connection's uses this port.
service imap-login-solo {
  executable = imap-login -l imap-solo
  protocol = imap
  type = login
  user = $default_login_user
  chroot = login
  service_count = 0
  client_limit = 100
  inet_listener imaps-solo {
    address = 127.0.0.1
    port = ${c.ports.imapSoloPort}
    ssl = yes
  }
}
service imap-solo {
  executable = imap
  protocol = imap
  extra_groups = $default_internal_group
  client_limit = 1
  process_limit = 100
  unix_listener login/imap-solo {
    mode = 0666
  }
}
service lmtp {
  unix_listener lmtp {
    mode = 0666
  }
}
service anvil {
  unix_listener anvil-auth-penalty {
    mode = 0
  }
}
service auth {
  # SASL for Postfix submission.
  unix_listener auth-postfix {
    mode = 0666
  }
  client_limit = ${Math.max(2000, loginLimit + 100)}
}
`;
}

function postfixMainCf(c: {
  p: { conf: string; queue: string; data: string };
  domain: string;
  tls: TlsFiles;
  postfixLog: string;
  lmtpSocket: string;
  authSocket: string;
  dir: string;
}): string {
  return `# Generated by test/mailserver/mailserver.ts — do not edit.
compatibility_level = 3.6
queue_directory = ${c.p.queue}
data_directory = ${c.p.data}
command_directory = /usr/sbin
daemon_directory = /usr/lib/postfix/sbin
meta_directory = /etc/postfix
shlib_directory = /usr/lib/postfix
mail_owner = postfix
setgid_group = postdrop
maillog_file = ${c.postfixLog}
maillog_file_prefixes = ${c.dir}
syslog_name = postfix-test

myhostname = mail.${c.domain}
mydomain = ${c.domain}
myorigin = $mydomain
mydestination =
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
alias_maps =
alias_database =
biff = no
append_dot_mydomain = no

# Every address of the test domain is a Dovecot mailbox, delivered over LMTP.
virtual_mailbox_domains = ${c.domain}
virtual_mailbox_maps = texthash:${path.join(c.p.conf, 'vmailbox')}
virtual_transport = lmtp:unix:${c.lmtpSocket}
virtual_alias_maps = regexp:${path.join(c.p.conf, 'external-sink.regexp')}
# Otherwise derived from virtual_alias_maps, which the regexp above would match.
virtual_alias_domains =
recipient_delimiter = +
# Nothing ever leaves the machine (non-local mail is rewritten to the sink above).
default_transport = error:external delivery disabled in tests
relay_transport = error:external delivery disabled in tests
local_transport = error:no local delivery
smtp_dns_support_level = disabled
lmtp_connection_cache_on_demand = no
smtpd_peername_lookup = no

# Deliver immediately, retry quickly.
in_flow_delay = 0
queue_run_delay = 1s
minimal_backoff_time = 1s
maximal_backoff_time = 2s
delay_warning_time = 0
smtpd_error_sleep_time = 0
smtpd_soft_error_limit = 1000
smtpd_hard_error_limit = 1000
default_process_limit = 200

message_size_limit = 52428800
mailbox_size_limit = 0
virtual_mailbox_limit = 0

smtpd_banner = $myhostname ESMTP test
smtpd_tls_cert_file = ${c.tls.cert}
smtpd_tls_key_file = ${c.tls.key}
smtpd_tls_security_level = may
smtpd_tls_loglevel = 0
smtpd_sasl_type = dovecot
smtpd_sasl_path = ${c.authSocket}
smtpd_sasl_auth_enable = no
# MX port: only mail for local users, from anyone.
smtpd_relay_restrictions = reject_unauth_destination
smtpd_recipient_restrictions =
`;
}

function postfixMasterCf(ports: Ports): string {
  // No chroot anywhere (column 5 = n): our paths live outside any chroot.
  const submission = [
    '-o smtpd_sasl_auth_enable=yes',
    '-o smtpd_relay_restrictions=permit_sasl_authenticated,reject',
    '-o smtpd_client_restrictions=',
  ];
  return `# Generated by test/mailserver/mailserver.ts — do not edit.
# service            type  private unpriv chroot wakeup maxproc command
127.0.0.1:${ports.mxPort} inet n - n - - smtpd
  -o syslog_name=postfix-test/mx
127.0.0.1:${ports.smtpPort} inet n - n - - smtpd
  -o syslog_name=postfix-test/submission
  -o smtpd_tls_security_level=encrypt
  -o smtpd_tls_auth_only=yes
  ${submission.join('\n  ')}
127.0.0.1:${ports.smtpsPort} inet n - n - - smtpd
  -o syslog_name=postfix-test/smtps
  -o smtpd_tls_wrappermode=yes
  ${submission.join('\n  ')}
pickup     unix  n - n 60 1 pickup
cleanup    unix  n - n - 0 cleanup
qmgr       unix  n - n 300 1 qmgr
tlsmgr     unix  - - n 1000? 1 tlsmgr
rewrite    unix  - - n - - trivial-rewrite
bounce     unix  - - n - 0 bounce
defer      unix  - - n - 0 bounce
trace      unix  - - n - 0 bounce
verify     unix  - - n - 1 verify
flush      unix  n - n 1000? 0 flush
proxymap   unix  - - n - - proxymap
proxywrite unix  - - n - 1 proxymap
smtp       unix  - - n - - smtp
relay      unix  - - n - - smtp
showq      unix  n - n - - showq
error      unix  - - n - - error
retry      unix  - - n - - error
discard    unix  - - n - - discard
lmtp       unix  - - n - - lmtp
anvil      unix  - - n - 1 anvil
scache     unix  - - n - 1 scache
postlog    unix-dgram n - n - 1 postlogd
`;
}

/**
 * What `postfix check` (post-install create-missing) would do for a fresh
 * queue, minus ~2 s of postconf invocations: create queue_directory and
 * data_directory subdirs with the owners/modes listed in Debian's
 * /etc/postfix/postfix-files ("$queue_directory/active:d:$mail_owner:-:700:ucr").
 */
function createPostfixDirs(queueDir: string, dataDir: string): void {
  const owner: Record<string, number> = { root: 0, $mail_owner: lookupId('/etc/passwd', 'postfix') };
  const group: Record<string, number> = { '-': 0, root: 0, $setgid_group: lookupId('/etc/group', 'postdrop') };
  const entries = fs
    .readFileSync('/etc/postfix/postfix-files', 'utf8')
    .split('\n')
    .map((l) => l.split(':'))
    .filter((f) => f[1] === 'd' && /^\$(queue|data)_directory(\/|$)/.test(f[0] ?? ''));
  if (entries.length < 10) throw new Error('unexpected /etc/postfix/postfix-files');
  for (const [name = '', , user = '', grp = '', mode = ''] of entries) {
    const target = name.replace('$queue_directory', queueDir).replace('$data_directory', dataDir);
    const uid = owner[user];
    const gid = group[grp];
    if (uid === undefined || gid === undefined || !/^[0-7]+$/.test(mode))
      throw new Error(`unexpected entry in postfix-files: ${name}`);
    fs.mkdirSync(target, { recursive: true });
    fs.chownSync(target, uid, gid);
    fs.chmodSync(target, parseInt(mode, 8));
  }
}

/** A throwaway CA and a server certificate for 127.0.0.1 / localhost / mail.<domain>. */
async function makeCertificates(tlsDir: string, domain: string): Promise<TlsFiles> {
  const f = (n: string) => path.join(tlsDir, n);
  const ssl = (...args: string[]) => run('openssl', args, { cwd: tlsDir });
  await ssl(
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-days',
    '3650',
    '-subj',
    '/CN=Mailserver Test CA',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
    '-keyout',
    f('ca.key'),
    '-out',
    f('ca.pem'),
  );
  await ssl(
    'req',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-subj',
    '/CN=localhost',
    '-keyout',
    f('server.key'),
    '-out',
    f('server.csr'),
  );
  fs.writeFileSync(
    f('server.ext'),
    [
      'basicConstraints=CA:FALSE',
      'keyUsage=critical,digitalSignature,keyEncipherment',
      'extendedKeyUsage=serverAuth',
      `subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:mail.${domain}`,
      '',
    ].join('\n'),
  );
  await ssl(
    'x509',
    '-req',
    '-in',
    f('server.csr'),
    '-CA',
    f('ca.pem'),
    '-CAkey',
    f('ca.key'),
    '-CAcreateserial',
    '-days',
    '3650',
    '-sha256',
    '-extfile',
    f('server.ext'),
    '-out',
    f('server.pem'),
  );
  fs.chmodSync(f('ca.pem'), 0o644);
  return { ca: f('ca.pem'), cert: f('server.pem'), key: f('server.key') };
}
