// Mail hosts judged by address at every connect (gateway/mail-hosts.ts), against the test Dovecot and
// Postfix on 127.0.0.1. The gateway's resolver is replaced by a table the test changes between
// connects, as a DNS record with a zero TTL can change between an auth intent and a reconnect.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { MailboxConfig } from '../../common/relay.ts';
import { loadConfig } from '../../gateway/config.ts';
import { classifyError, GatewayError } from '../../gateway/errors.ts';
import { imapOptions, openImap } from '../../gateway/imap.ts';
import { configureMailHosts } from '../../gateway/mail-hosts.ts';
import { verifyMailbox } from '../../gateway/verify.ts';
import { findUser, trustTestCa } from '../mailserver/client.ts';

const mail = inject('mailserver');
const TIMEOUT_MS = 2_000;
/** On the test certificate (DNS:mail.<domain>), so TLS to it verifies when it reaches the test servers. */
const NAME = `mail.${mail.domain}`;

const answers = new Map<string, string[]>();
const lookups: string[] = [];
const resolve = async (host: string) => {
  lookups.push(host);
  const found = answers.get(host);
  if (!found) throw Object.assign(new Error(`${host}: not found`), { code: 'ENOTFOUND' });
  return found;
};

function configFor(host: string): MailboxConfig {
  const u = findUser(mail, 'alice');
  const server = { host, user: u.user, password: u.password };
  return {
    email: u.email,
    display_name: null,
    imap: { ...server, port: mail.imapPort, encryption: 'SSL' },
    smtp: { ...server, port: mail.smtpPort, encryption: 'STARTTLS' },
  };
}

const failure = (work: Promise<unknown>) =>
  work.then(
    () => null,
    (err: unknown) => classifyError(err, 'IMAP', NAME, mail.imapPort),
  );

const connect = (host: string) =>
  openImap(imapOptions(configFor(host).imap, { timeoutMs: TIMEOUT_MS }, { disableAutoIdle: true })).then((client) =>
    client.logout(),
  );

beforeAll(() => trustTestCa(mail));
afterAll(() => configureMailHosts({ allowPrivate: true }));

describe('with ALLOW_PRIVATE_MAIL_HOSTS off', () => {
  beforeAll(() => configureMailHosts({ allowPrivate: false, resolve }));

  it('refuses a name that resolves to 127.0.0.1 like 127.0.0.1 itself, in verify (the auth intent) too', async () => {
    answers.set(NAME, ['127.0.0.1']);
    for (const host of [NAME, '127.0.0.1', '::ffff:127.0.0.1', '::1']) {
      const err = await verifyMailbox(configFor(host), TIMEOUT_MS).catch((e: unknown) => e);
      expect(err, host).toBeInstanceOf(GatewayError);
      // Told apart from an unreachable server: the Worker answers as for a private host written out.
      expect((err as GatewayError).kind).toBe('private_host');
      expect((err as GatewayError).message).toBe('imap_host');
    }
    // A private SMTP host is refused too, and wins over an IMAP server that cannot be reached.
    answers.set(NAME, ['198.51.100.7']);
    answers.set('smtp.example.com', ['10.0.0.25']);
    const smtpPrivate = configFor(NAME);
    smtpPrivate.smtp.host = 'smtp.example.com';
    const err = await verifyMailbox(smtpPrivate, TIMEOUT_MS).catch((e: unknown) => e);
    expect((err as GatewayError).kind).toBe('private_host');
    expect((err as GatewayError).message).toBe('smtp_host');
    // Mapped and other IPv6 forms in a DNS answer count as what they carry.
    for (const answer of ['::ffff:127.0.0.1', '::ffff:10.1.2.3', 'fd00::25', 'fe80::1', 'ff02::1', '::', '0.0.0.0']) {
      answers.set(NAME, [answer]);
      expect((await failure(connect(NAME)))?.reason, answer).toBe('refused: a private address');
    }
    // One private address among public ones is enough.
    answers.set(NAME, ['198.51.100.7', '127.0.0.1']);
    expect((await failure(connect(NAME)))?.reason).toBe('refused: a private address');
  });

  it('judges every connect anew: an answer that turns private later is refused at that connect', async () => {
    // First a public answer: the gateway connects there (nothing answers at this documentation address).
    answers.set(NAME, ['198.51.100.7']);
    lookups.length = 0;
    const first = await failure(connect(NAME));
    expect(first?.reason).not.toBe('refused: a private address');
    expect(lookups).toEqual([NAME]); // one lookup per connect, none by imapflow
    // Then the record points at the test Dovecot, whose port is open: refused before any connection.
    answers.set(NAME, ['127.0.0.1']);
    const later = await failure(connect(NAME));
    expect(later?.reason).toBe('refused: a private address');
    expect(lookups).toEqual([NAME, NAME]);
    // What the account would show (last_error) is the same whether something listens there or not.
    expect(later?.message).toBe(first?.message);
    expect(later?.message).toBe(`IMAP ${NAME}:${mail.imapPort}: the server could not be reached`);
  });
});

describe('with ALLOW_PRIVATE_MAIL_HOSTS on', () => {
  beforeAll(() => configureMailHosts({ allowPrivate: true, resolve }));

  it('connects to the address it resolved and verifies TLS against the host name', async () => {
    answers.set(NAME, ['127.0.0.1']);
    await expect(verifyMailbox(configFor(NAME), TIMEOUT_MS)).resolves.toMatchObject({
      folders: expect.arrayContaining([expect.objectContaining({ path: 'INBOX' })]),
    });
    // A name the certificate does not carry fails TLS although the address is the same server.
    answers.set('other.invalid', ['127.0.0.1']);
    const err = await verifyMailbox(configFor('other.invalid'), TIMEOUT_MS).catch((e: unknown) => e);
    expect((err as GatewayError).reason).toMatch(/TLS handshake failed/);
  });
});

describe('WORKER_URL', () => {
  const load = (url: string) => () => loadConfig({ WORKER_URL: url, GATEWAY_SECRET: 'secret' });

  it('must be https unless it is this machine (lease answers carry mailbox passwords)', () => {
    for (const url of ['http://mail-edge.example.com', 'http://10.0.0.5:8787', 'http://[fd00::1]:8787'])
      expect(load(url), url).toThrow(/must be https/);
    for (const url of [
      'https://mail-edge.example.com',
      'http://127.0.0.1:8787',
      'http://localhost:8787',
      'http://[::1]:8787',
    ])
      expect(load(url), url).not.toThrow();
  });
});
