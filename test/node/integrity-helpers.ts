/** What the end-to-end integrity tests share: their setup, test messages, the events an account got, waiting for emails. */
import { createHash } from 'node:crypto';
import type { ImapFlow } from 'imapflow';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { openImap } from '../mailserver/client.ts';
import { feedEvents } from './event-feed.ts';
import type { MailServer } from '../mailserver/mailserver.ts';
import {
  dumpLogsOnFailure,
  eventually,
  startEndToEnd,
  stopEndToEnd,
  type GatewayProcess,
  type Service,
} from './service.ts';

export interface Suite {
  mail: MailServer;
  service: Service;
  /** The running gateway (a test that kills it puts the new one here). */
  gateway: GatewayProcess;
  /**
   * Environment of the suite's gateways: the mail server's CA and a 1 s poll (folders nobody IDLEs
   * on are looked at often), or the shipped poll interval for a suite that asks for the defaults.
   */
  gatewayEnv(): Record<string, string>;
  /** An IMAP client of another mail program, logged out after the file. */
  imap(user: string): Promise<ImapFlow>;
}

/**
 * Registers the file's hooks: a private Dovecot + Postfix, `npm start` and one gateway, all stopped
 * afterwards. `defaults`: the gateway runs with the shipped settings (no fast poll); `env`: more of its
 * environment; `mail`: how Dovecot runs (without some extensions).
 */
export function endToEndSuite(
  gatewayId: string,
  {
    defaults = false,
    env = {},
    mail = {},
    worker = {},
  }: {
    defaults?: boolean;
    env?: Record<string, string>;
    mail?: Parameters<typeof startEndToEnd>[2];
    /** Extra environment of `npm start` (e.g. MAIL_SHARDS). */
    worker?: Record<string, string>;
  } = {},
): Suite {
  const clients: ImapFlow[] = [];
  const fast: Record<string, string> = { ...(defaults ? {} : { GATEWAY_POLL_INTERVAL_MS: '1000' }), ...env };
  const suite = {
    gatewayEnv: () => ({ NODE_EXTRA_CA_CERTS: suite.mail.caFile, ...fast }),
    async imap(user: string) {
      const client = await openImap(suite.mail.info(), user);
      clients.push(client);
      return client;
    },
  } as unknown as Suite;
  // The project's hookTimeout (300 s): `npm start` alone may take minutes on a loaded machine.
  beforeAll(async () => {
    Object.assign(suite, await startEndToEnd(gatewayId, fast, mail, worker));
  });
  afterEach((ctx) => dumpLogsOnFailure(ctx, suite.service));
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.logout().catch(() => undefined)));
    await stopEndToEnd(suite);
  });
  return suite;
}

/** A small RFC 822 message whose Message-ID follows from its subject; `extraHeaders` end with CRLF. */
export const rfc822 = (subject: string, extraHeaders = '', body = `Body of ${subject}\r\n`) =>
  `From: sender@remote.test\r\nTo: someone@example.test\r\nSubject: ${subject}\r\nMessage-ID: <${createHash('sha1').update(subject).digest('hex')}@remote.test>\r\nDate: ${new Date().toUTCString()}\r\n${extraHeaders}\r\n${body}`;

/** The newest event row so far in each database (rowids of `events` by binding), to read what came after. */
export type EventMark = Map<string, number>;

export const eventMark = (service: Service): EventMark =>
  new Map(
    service
      .queryEach<{ m: number | null }>('SELECT MAX(rowid) AS m FROM events')
      .map(({ database, rows }) => [database, rows[0]?.m ?? 0]),
  );

/**
 * Events of an account written after `mark`: those of its own row (the directory) first, then its mail
 * events (its shard), each database's in the order written; read from every database so that a
 * removed account's are found too. Their data is as the feed gives it (event-feed.ts), or as stored
 * for events the feed no longer shows (a removed account's).
 */
export async function eventsSince(
  service: Service,
  accountId: string,
  mark: EventMark,
): Promise<{ type: string; data: any }[]> {
  const stored = service
    .queryEach<{ n: number; id: string; type: string; data_json: string }>(
      'SELECT rowid AS n, id, type, data_json FROM events WHERE account_id = ? ORDER BY rowid',
      accountId,
    )
    .flatMap(({ database, rows }) => rows.filter((e) => e.n > (mark.get(database) ?? 0)));
  const fed = new Map((await feedEvents(service, accountId).catch(() => [])).map((e) => [e.id, e.data]));
  return stored.map((e) => ({ type: e.type, data: fed.has(e.id) ? fed.get(e.id) : JSON.parse(e.data_json) }));
}

/** The account's emails by subject (the tests give every message its own subject). */
export const bySubject = async (service: Service, accountId: string): Promise<Map<string, any>> =>
  new Map((await service.listEmails(accountId)).map((e: any) => [e.subject as string, e]));

export async function waitListed(service: Service, accountId: string, subjects: string[], timeoutMs = 60_000) {
  return eventually(
    async () => {
      const listed = await bySubject(service, accountId);
      return subjects.every((s) => listed.has(s)) ? listed : null;
    },
    { what: `${subjects.length} emails listed`, timeoutMs, intervalMs: 250 },
  );
}

/** Long enough for several polls of a gateway started with GATEWAY_POLL_INTERVAL_MS=1000. */
export const severalPolls = () => new Promise((r) => setTimeout(r, 4_000));
