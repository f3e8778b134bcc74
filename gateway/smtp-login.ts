/**
 * The SMTP half of verify without nodemailer: connect (implicit TLS, STARTTLS or neither, as
 * configured), EHLO, AUTH PLAIN or LOGIN, QUIT. A gateway that only verifies and holds idle accounts
 * then never loads nodemailer (docs/capacity.md: it is loaded for the first send). Failures
 * carry the codes gateway/errors.ts maps: EAUTH (invalid_credentials), socket and TLS codes,
 * CONNECT_TIMEOUT, GREETING_TIMEOUT, ETIMEDOUT, EConnectionClosed, EPROTOCOL.
 */
import { isIP, connect as netConnect, type Socket } from 'node:net';
import { hostname } from 'node:os';
import { connect as tlsConnect } from 'node:tls';
import type { ServerConfig } from '../common/relay.ts';
import { sharedSecureContext } from './imap.ts';
import { mailHostTarget } from './mail-hosts.ts';

interface Reply {
  code: number;
  lines: string[];
}

function smtpError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

/** Reads the server's replies (multi-line ones joined) from whichever socket is current. */
class ReplyReader {
  #buffer = '';
  #lines: string[] = [];
  #replies: Reply[] = [];
  #waiter: { resolve: (reply: Reply) => void; reject: (err: Error) => void } | null = null;
  #error: Error | null = null;
  #socket: Socket | null = null;
  readonly #onData = (chunk: Buffer) => this.#take(chunk.toString('latin1'));

  /** Reads from `socket` from now on (after STARTTLS: the TLS socket wrapping the plain one). */
  attach(socket: Socket): void {
    this.#socket?.off('data', this.#onData);
    this.#socket = socket;
    socket.on('data', this.#onData);
  }

  next(): Promise<Reply> {
    const reply = this.#replies.shift();
    if (reply) return Promise.resolve(reply);
    if (this.#error) return Promise.reject(this.#error);
    return new Promise((resolve, reject) => {
      this.#waiter = { resolve, reject };
    });
  }

  /** Why the conversation ended early, if it did. */
  get error(): Error | null {
    return this.#error;
  }

  fail(err: Error): void {
    this.#error ??= err;
    const waiter = this.#waiter;
    this.#waiter = null;
    waiter?.reject(this.#error);
  }

  #take(text: string): void {
    this.#buffer += text;
    for (let end = this.#buffer.indexOf('\n'); end >= 0; end = this.#buffer.indexOf('\n')) {
      const line = this.#buffer.slice(0, end).replace(/\r$/, '');
      this.#buffer = this.#buffer.slice(end + 1);
      const match = /^(\d{3})([ -]?)(.*)$/.exec(line);
      if (!match) {
        this.fail(smtpError('EPROTOCOL', 'unreadable SMTP reply'));
        return;
      }
      this.#lines.push(match[3]!);
      if (match[2] === '-') continue;
      const reply = { code: Number(match[1]), lines: this.#lines };
      this.#lines = [];
      const waiter = this.#waiter;
      this.#waiter = null;
      if (waiter) waiter.resolve(reply);
      else this.#replies.push(reply);
    }
  }
}

/** The EHLO name, as nodemailer picks it: the host's name when it is a domain, else an address literal. */
function ehloName(): string {
  const name = hostname();
  return name.includes('.') ? name : '[127.0.0.1]';
}

/** One SMTP conversation: its socket (replaced by the TLS one after STARTTLS) and its replies. */
class Conversation {
  readonly replies = new ReplyReader();
  socket: Socket;
  /** What a timeout means now: CONNECT_TIMEOUT, then GREETING_TIMEOUT, then ETIMEDOUT. */
  stage = 'CONNECT_TIMEOUT';
  #timeoutMs: number;

  constructor(socket: Socket, timeoutMs: number) {
    this.#timeoutMs = timeoutMs;
    this.socket = socket;
    this.#watch(socket);
  }

  #watch(socket: Socket): void {
    this.replies.attach(socket);
    socket.setTimeout(this.#timeoutMs, () => this.fail(smtpError(this.stage, `SMTP ${this.stage}`)));
    socket.on('error', (err) => this.replies.fail(err));
    socket.on('close', () => this.replies.fail(smtpError('EConnectionClosed', 'SMTP connection closed by the server')));
  }

  /** Sends a command and reads its reply; throws unless the reply's code is `expect`. */
  async command(line: string, expect: number, what = line.split(' ')[0]!): Promise<Reply> {
    this.socket.write(`${line}\r\n`);
    return this.expect(expect, what);
  }

  async expect(code: number, what: string): Promise<Reply> {
    const reply = await this.replies.next();
    if (reply.code !== code) throw smtpError(what === 'AUTH' ? 'EAUTH' : 'EPROTOCOL', `SMTP ${what}: ${reply.code}`);
    return reply;
  }

  /** STARTTLS's handshake over the open socket; from then on the conversation reads the TLS socket. */
  async upgrade(server: ServerConfig): Promise<void> {
    const plain = this.socket;
    plain.setTimeout(0);
    const secure = tlsConnect({ socket: plain, ...tlsTarget(server) });
    this.socket = secure;
    this.#watch(secure);
    await new Promise<void>((resolve, reject) => {
      secure.once('secureConnect', resolve);
      secure.once('error', reject);
      // A timeout destroys the socket without an error event.
      secure.once('close', () =>
        reject(this.replies.error ?? smtpError('EConnectionClosed', 'SMTP connection closed')),
      );
    });
  }

  fail(err: Error): void {
    this.replies.fail(err);
    this.socket.destroy();
  }
}

function tlsTarget(server: ServerConfig) {
  return {
    host: server.host,
    port: server.port,
    // SNI takes names only; the certificate is still checked against an address host.
    servername: isIP(server.host) ? undefined : server.host,
    secureContext: sharedSecureContext(),
  };
}

/** The AUTH mechanisms an EHLO reply offers (upper case). */
function authMechanisms(ehlo: Reply): Set<string> {
  const line = ehlo.lines.find((l) => /^AUTH[ =]/i.test(l));
  return new Set(line?.slice(5).toUpperCase().split(/\s+/).filter(Boolean));
}

const base64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');

async function authenticate(smtp: Conversation, ehlo: Reply, user: string, password: string): Promise<void> {
  const mechanisms = authMechanisms(ehlo);
  if (mechanisms.has('PLAIN')) {
    await smtp.command(`AUTH PLAIN ${base64(`\0${user}\0${password}`)}`, 235, 'AUTH');
  } else if (mechanisms.has('LOGIN')) {
    await smtp.command('AUTH LOGIN', 334, 'AUTH');
    await smtp.command(base64(user), 334, 'AUTH');
    await smtp.command(base64(password), 235, 'AUTH');
  } else {
    throw smtpError('EPROTOCOL', 'the SMTP server offers neither AUTH PLAIN nor AUTH LOGIN');
  }
}

/** Connects, upgrades to TLS as configured and logs in; throws (see the codes above) on failure. */
export async function checkSmtpLogin(server: ServerConfig, timeoutMs: number): Promise<void> {
  const { address } = await mailHostTarget(server.host);
  const socket =
    server.encryption === 'SSL'
      ? tlsConnect({ ...tlsTarget(server), host: address })
      : netConnect({ host: address, port: server.port });
  const smtp = new Conversation(socket, timeoutMs);
  socket.once(server.encryption === 'SSL' ? 'secureConnect' : 'connect', () => {
    smtp.stage = 'GREETING_TIMEOUT';
  });
  try {
    await smtp.expect(220, 'greeting');
    smtp.stage = 'ETIMEDOUT';
    let ehlo = await smtp.command(`EHLO ${ehloName()}`, 250);
    if (server.encryption === 'STARTTLS') {
      if (!ehlo.lines.some((l) => /^STARTTLS\b/i.test(l)))
        throw Object.assign(smtpError('ETLS', 'the SMTP server does not offer STARTTLS'), { tlsFailed: true });
      await smtp.command('STARTTLS', 220);
      await smtp.upgrade(server);
      ehlo = await smtp.command(`EHLO ${ehloName()}`, 250);
    }
    await authenticate(smtp, ehlo, server.user, server.password);
    await smtp.command('QUIT', 221).catch(() => undefined);
  } finally {
    smtp.socket.destroy();
  }
}
