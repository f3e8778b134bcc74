// verify's SMTP login without nodemailer (gateway/smtp-login.ts): against the test Postfix (STARTTLS
// and implicit TLS) and against small scripted servers for what Postfix does not do (AUTH LOGIN only,
// no STARTTLS, no greeting). Failures are checked as verify reports them (gateway/errors.ts).
import { createServer, type Server, type Socket } from 'node:net';
import { afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import type { ServerConfig } from '../../common/relay.ts';
import { classifyError, type GatewayError } from '../../gateway/errors.ts';
import { checkSmtpLogin } from '../../gateway/smtp-login.ts';
import { findUser, trustTestCa } from '../mailserver/client.ts';

const mail = inject('mailserver');
const TIMEOUT_MS = 5_000;

beforeAll(() => trustTestCa(mail));

function postfix(encryption: 'SSL' | 'STARTTLS', password?: string): ServerConfig {
  const u = findUser(mail, 'alice');
  const port = encryption === 'SSL' ? mail.smtpsPort : mail.smtpPort;
  return { host: mail.host, port, encryption, user: u.user, password: password ?? u.password };
}

/** What verify would report for this server (null when the login succeeds). */
async function outcome(server: ServerConfig, timeoutMs = TIMEOUT_MS): Promise<GatewayError | null> {
  return checkSmtpLogin(server, timeoutMs).then(
    () => null,
    (err: unknown) => classifyError(err, 'SMTP', server.host, server.port),
  );
}

describe('against Postfix', () => {
  it('logs in over STARTTLS and over implicit TLS', async () => {
    expect(await outcome(postfix('STARTTLS'))).toBeNull();
    expect(await outcome(postfix('SSL'))).toBeNull();
  });

  it('maps a wrong password to invalid_credentials without echoing it', async () => {
    const err = await outcome(postfix('STARTTLS', 'wrong-password-XYZ'));
    expect(err?.kind).toBe('invalid_credentials');
    expect(err?.message).not.toContain('wrong-password-XYZ');
  });

  it('maps implicit TLS against the STARTTLS port to a TLS failure', async () => {
    const err = await outcome({ ...postfix('STARTTLS'), encryption: 'SSL' });
    expect(err?.kind).toBe('provider_error');
    expect(err?.reason).toMatch(/TLS handshake failed/);
  });
});

describe('against scripted servers', () => {
  let server: Server | undefined;
  const sockets = new Set<Socket>();

  afterEach(async () => {
    for (const s of sockets) s.destroy();
    sockets.clear();
    await new Promise((r) => (server ? server.close(r) : r(undefined)));
    server = undefined;
  });

  /** A plaintext server answering each command line with `answer(line)`; null says nothing at all. */
  async function scripted(greeting: string | null, answer: (line: string) => string): Promise<number> {
    server = createServer((socket) => {
      sockets.add(socket);
      if (greeting === null) return;
      socket.write(`${greeting}\r\n`);
      let buffer = '';
      socket.on('data', (chunk) => {
        buffer += chunk.toString('latin1');
        for (let end = buffer.indexOf('\r\n'); end >= 0; end = buffer.indexOf('\r\n')) {
          const line = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          socket.write(`${answer(line)}\r\n`);
          if (line === 'QUIT') socket.end();
        }
      });
    });
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    return (server.address() as { port: number }).port;
  }

  const plain = (port: number, encryption: ServerConfig['encryption'] = 'NONE'): ServerConfig => ({
    host: '127.0.0.1',
    port,
    encryption,
    user: 'user@example.com',
    password: 'secret',
  });

  it('logs in with AUTH LOGIN where PLAIN is not offered', async () => {
    const b64 = (s: string) => Buffer.from(s).toString('base64');
    const seen: string[] = [];
    const port = await scripted('220 test ESMTP', (line) => {
      seen.push(line);
      if (line.startsWith('EHLO')) return '250-test\r\n250-AUTH LOGIN CRAM-MD5\r\n250 8BITMIME';
      if (line === 'AUTH LOGIN' || line === b64('user@example.com')) return '334 go on';
      if (line === b64('secret')) return '235 2.7.0 accepted';
      return line === 'QUIT' ? '221 bye' : '500 what';
    });
    expect(await outcome(plain(port))).toBeNull();
    expect(seen.at(-1)).toBe('QUIT');
  });

  it('maps a server without STARTTLS to a TLS failure when STARTTLS is required', async () => {
    const port = await scripted('220 test ESMTP', (line) =>
      line.startsWith('EHLO') ? '250-test\r\n250 AUTH PLAIN' : '221 bye',
    );
    const err = await outcome(plain(port, 'STARTTLS'));
    expect(err?.kind).toBe('provider_error');
    expect(err?.reason).toMatch(/TLS/);
  });

  it('maps a server that never greets to a greeting timeout', async () => {
    const port = await scripted(null, () => '');
    const err = await outcome(plain(port), 300);
    expect(err?.kind).toBe('provider_error');
    expect(err?.reason).toMatch(/timed out waiting for the greeting/);
  });
});
