/**
 * A real Courier-IMAP 5.0 (Debian's courier-imap, unpacked, not installed: it conflicts with
 * dovecot-imapd) on 127.0.0.1 with implicit TLS, for tests. See README.md "Courier and Cyrus".
 *
 * Courier's paths are compiled in: authdaemond reads /etc/courier/authdaemonrc, loads its modules
 * from /usr/lib/courier-authlib and listens on /run/courier/authdaemon/socket, where imaplogin asks
 * it; the userdb module reads /etc/courier/userdb.dat. So the daemons run in a private mount
 * namespace (`unshare --mount`) in which /etc and /usr are read-only overlays of this server's own
 * files, the unpacked packages and the real directories, and /run is a fresh tmpfs. Nothing outside
 * the namespace changes; it ends with its last process.
 */
import { type ChildProcess, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {
  type OtherImapServer,
  type OtherServerOptions,
  otherServerClient,
  otherServerDir,
  otherServerUsers,
} from './other-server.ts';
import {
  freeLoopbackPort,
  installExitHooks,
  killGroup,
  live,
  lookupId,
  spawnOwned,
  stopGroup,
  waitUntilReady,
} from './processes.ts';
import { ensureUnpacked } from './unpacked-debs.ts';

/** Debian's courier-imap and what it needs that cannot come from the installed system. */
const PACKAGES = [
  'courier-imap',
  'courier-base',
  'courier-authlib',
  'courier-authdaemon',
  'courier-authlib-userdb',
  'gamin',
];
const BINARIES = [
  'usr/bin/imapd',
  'usr/bin/couriertls',
  'usr/sbin/couriertcpd',
  'usr/lib/courier/courier/imaplogin',
  'usr/lib/courier/courier-authlib/authdaemond',
  'usr/lib/courier/courier-authlib/makedatprog',
  'usr/lib/courier-authlib/libauthuserdb.so.0',
];

/** Folders every mailbox starts with (Courier has no SPECIAL-USE: names are all a client has). */
const FOLDERS = ['Drafts', 'Sent', 'Trash', 'Junk', 'Archive'];

/** What /etc/courier/imapd would export (Debian's defaults, IMAP_CAPABILITY as shipped). */
const IMAPD_ENV: Record<string, string> = {
  IMAP_CAPABILITY: 'IMAP4rev1 UIDPLUS CHILDREN NAMESPACE THREAD=ORDEREDSUBJECT THREAD=REFERENCES SORT QUOTA IDLE',
  IMAP_CAPABILITY_TLS:
    'IMAP4rev1 UIDPLUS CHILDREN NAMESPACE THREAD=ORDEREDSUBJECT THREAD=REFERENCES SORT QUOTA IDLE AUTH=PLAIN',
  IMAP_KEYWORDS: '1',
  IMAP_ACL: '1',
  IMAP_IDLE_TIMEOUT: '60',
  IMAP_MAILBOX_SANITY_CHECK: '1',
  IMAP_USELOCKS: '1',
  IMAP_ENHANCEDIDLE: '0',
  IMAP_TRASHFOLDERNAME: 'Trash',
  IMAP_EMPTYTRASH: 'Trash:7',
  IMAP_MOVE_EXPUNGE_TO_TRASH: '0',
  IMAP_UMASK: '022',
  IMAP_TLS: '1',
  MAILDIRPATH: 'Maildir',
};

let deliveries = 0;

export async function startCourier(opts: OtherServerOptions): Promise<OtherImapServer> {
  const pkg = await ensureUnpacked('courier', PACKAGES, BINARIES);
  const users = otherServerUsers(opts);
  const keep = opts.keep ?? process.env.MAILSERVER_KEEP === '1';
  const mailUid = lookupId('/etc/passwd', 'mail');
  const mailGid = lookupId('/etc/group', 'mail');
  const dir = otherServerDir('courier');
  const etc = path.join(dir, 'etc', 'courier');
  const mailRoot = path.join(dir, 'mail');
  const log = path.join(dir, 'courier.log');
  const maildir = (user: string) => path.join(mailRoot, user, 'Maildir');
  let child: ChildProcess | undefined;
  const killSync = () => {
    killGroup(child, 'SIGKILL');
    if (!keep) fs.rmSync(dir, { recursive: true, force: true, maxRetries: 5 });
  };
  try {
    fs.mkdirSync(etc, { recursive: true });
    fs.writeFileSync(
      path.join(etc, 'authdaemonrc'),
      'authmodulelist="authuserdb"\ndaemons=3\nauthdaemonvar=/run/courier/authdaemon\nDEBUG_LOGIN=0\nDEFAULTOPTIONS=""\nLOGGEROPTS=""\n',
    );
    // What makeuserdb (a Perl script with the same compiled-in paths) writes: the passwords go to
    // userdbshadow.dat, the rest to userdb.dat; `_=` is the (empty) userdb sub-path it appends.
    const makedat = path.join(pkg.root, 'usr/lib/courier/courier-authlib/makedatprog');
    const makeDb = (file: string, lines: string[]) =>
      execFileSync(makedat, ['-', path.join(etc, `${file}.tmp`), path.join(etc, file)], {
        input: `${lines.join('\n')}\n.\n`,
        env: { ...process.env, LD_LIBRARY_PATH: pkg.libraryPath },
      });
    makeDb(
      'userdb.dat',
      users.map(
        (u) =>
          `${u.user}\tuid=${mailUid}|gid=${mailGid}|home=${path.join(mailRoot, u.user)}|mail=${maildir(u.user)}|_=`,
      ),
    );
    makeDb(
      'userdbshadow.dat',
      users.map(
        (u) => `${u.user}\tsystempw=${execFileSync('openssl', ['passwd', '-6', u.password]).toString().trim()}`,
      ),
    );
    // couriertls reads key and certificate from one file.
    const pem = path.join(etc, 'imapd.pem');
    fs.writeFileSync(pem, fs.readFileSync(opts.tls.key, 'utf8') + fs.readFileSync(opts.tls.cert, 'utf8'), {
      mode: 0o600,
    });

    for (const u of users) {
      for (const folder of ['', ...FOLDERS.map((f) => `.${f}`)]) {
        for (const sub of ['cur', 'new', 'tmp'])
          fs.mkdirSync(path.join(maildir(u.user), folder, sub), { recursive: true });
        if (folder) fs.writeFileSync(path.join(maildir(u.user), folder, 'maildirfolder'), '');
      }
    }
    execFileSync('chown', ['-R', `${mailUid}:${mailGid}`, mailRoot]);

    const imapPort = await freeLoopbackPort();
    const script = [
      'set -e',
      `mount -t overlay overlay -o lowerdir=${path.join(dir, 'etc')}:${pkg.root}/etc:/etc /etc`,
      `mount -t overlay overlay -o lowerdir=${pkg.root}/usr:/usr /usr`,
      'mount -t tmpfs tmpfs /run',
      'mkdir -p /run/courier/authdaemon',
      '/usr/lib/courier/courier-authlib/authdaemond &',
      // imaplogin needs the socket at once; authdaemond creates it after loading its modules.
      'i=0; while [ ! -S /run/courier/authdaemon/socket ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done',
      `exec /usr/sbin/couriertcpd -address=127.0.0.1 -maxprocs=400 -maxperip=400 -nodnslookup -noidentlookup ${imapPort} /usr/bin/couriertls -server -tcpd /usr/lib/courier/courier/imaplogin /usr/bin/imapd Maildir`,
    ].join('\n');
    const env = {
      PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
      LD_LIBRARY_PATH: pkg.libraryPath,
      TLS_CERTFILE: pem,
      TLS_PROTOCOL: 'TLS1_2+',
      TLS_VERIFYPEER: 'NONE',
      ...IMAPD_ENV,
    };
    installExitHooks();
    live.add(killSync);
    child = spawnOwned(
      'unshare',
      ['--mount', '--propagation', 'private', '--pid', '--fork', '--kill-child', 'sh', '-c', script],
      log,
      env,
    );
    await waitUntilReady({ child, name: 'courier', log, ports: [imapPort] }, [imapPort]);

    const server: OtherImapServer = {
      kind: 'courier',
      host: '127.0.0.1',
      imapPort,
      users,
      dir,
      log,
      folderPath: (name) => `INBOX.${name}`,
      async deliver(user, raw, folder = 'INBOX') {
        // As Courier's deliverquota / maildrop do: write into tmp/, then rename into new/.
        const base =
          folder === 'INBOX' ? maildir(user) : path.join(maildir(user), `.${folder.replace(/^INBOX\./, '')}`);
        const body = Buffer.from(raw);
        const name = `${Math.floor(Date.now() / 1000)}.M${process.hrtime.bigint() % 1_000_000n}P${process.pid}Q${++deliveries}.mail.test,S=${body.length}`;
        const tmp = path.join(base, 'tmp', name);
        fs.writeFileSync(tmp, body, { mode: 0o600 });
        fs.chownSync(tmp, mailUid, mailGid);
        fs.renameSync(tmp, path.join(base, 'new', name));
      },
      openImap: async (user) => {
        const client = otherServerClient(server, fs.readFileSync(opts.tls.ca, 'utf8'), user);
        await client.connect();
        return client;
      },
      async stop() {
        live.delete(killSync);
        // Maildirs are crash-safe and the pid namespace ends with its first process: nothing to wait for.
        await stopGroup(child, 'SIGKILL');
        if (!keep) fs.rmSync(dir, { recursive: true, force: true, maxRetries: 5 });
      },
    };
    return server;
  } catch (err) {
    live.delete(killSync);
    killSync();
    throw err;
  }
}
