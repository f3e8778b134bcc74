/**
 * What the IMAP servers other than Dovecot (./courier.ts, ./cyrus.ts) offer tests: IMAP only, on
 * 127.0.0.1 with implicit TLS (the certificate of a running test Dovecot, so the same CA is trusted),
 * the same users and passwords as ./mailserver.ts, and delivery the way the server's own MDA does it.
 * SMTP stays on the test Postfix (./mailserver.ts): it authenticates the same users.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ImapFlow } from 'imapflow';
import type { MailUser } from './client.ts';
import { DEFAULT_USERS, passwordFor } from './mailserver.ts';

export interface OtherImapServer {
  kind: 'courier' | 'cyrus';
  host: '127.0.0.1';
  /** IMAPS (implicit TLS, the certificate given at start). */
  imapPort: number;
  users: MailUser[];
  /** Temp dir with configs, mail and logs (removed on stop unless MAILSERVER_KEEP=1). */
  dir: string;
  /** What the daemons printed (Courier: authdaemond and couriertcpd; Cyrus: master and services). */
  log: string;
  /** The server's name of a top-level folder the user creates: Courier puts every folder under `INBOX.`. */
  folderPath(name: string): string;
  /** Deliver a message into a user's folder (default INBOX) as the server's own delivery agent does. */
  deliver(user: string, raw: string | Buffer, folder?: string): Promise<void>;
  /** An IMAP client of another mail program, logged in as `user`. */
  openImap(user: string): Promise<ImapFlow>;
  stop(): Promise<void>;
}

export interface OtherServerOptions {
  /** The certificate and key to serve (a test Dovecot's `tls`): its CA is the one the gateway trusts. */
  tls: { ca: string; cert: string; key: string };
  /** Local parts of the users (default alice, bob, carol, dave, erin). */
  users?: string[];
  domain?: string;
  keep?: boolean;
}

export function otherServerUsers(opts: OtherServerOptions): MailUser[] {
  const domain = opts.domain ?? 'example.test';
  return (opts.users ?? DEFAULT_USERS).map((name) => {
    if (!/^[a-z0-9][a-z0-9._-]*$/.test(name)) throw new Error(`invalid test user name: ${name}`);
    return { user: name, email: `${name}@${domain}`, password: passwordFor(name) };
  });
}

export function otherServerDir(kind: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${kind}-`));
  fs.chmodSync(dir, 0o755);
  return dir;
}

/** An ImapFlow client for a test user over implicit TLS, verified against the CA of `caFile`. */
export function otherServerClient(
  server: Pick<OtherImapServer, 'host' | 'imapPort' | 'users'>,
  ca: string,
  user: string,
) {
  const u = server.users.find((x) => x.user === user);
  if (!u) throw new Error(`no test user ${user}`);
  return new ImapFlow({
    host: server.host,
    port: server.imapPort,
    secure: true,
    auth: { user: u.user, pass: u.password },
    tls: { ca },
    logger: false,
  });
}
