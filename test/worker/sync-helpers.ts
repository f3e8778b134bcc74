import { createExecutionContext, runDurableObjectAlarm, waitOnExecutionContext } from 'cloudflare:test';
/** Helpers for tests of the sync path inside workerd: accounts set up as POST /auth/intent would, raw messages. */
import { env } from 'cloudflare:workers';
import type { FolderInfo, MessageIn } from '../../common/relay.ts';
import { sealPasswords } from '../../worker/accounts/credentials.ts';
import { newId } from '../../worker/lib/ids.ts';
import { completeEmailEvents } from '../../worker/emails/event-data.ts';
import { accountObject } from '../../worker/durable/account-stub.ts';
import type { AccountObject } from '../../worker/durable/account-object.ts';
import { signRequest, GATEWAY_SIGNATURE_HEADER } from '../../common/signing.ts';
import { exports } from 'cloudflare:workers';
import { createApp } from '../../worker/app.ts';
import type { Env } from '../../worker/env.ts';
import { api } from './helpers.ts';
import {
  accountShard,
  chooseShard,
  DIRECTORY_SHARD,
  mailDb,
  markAccountInShard,
  shardByName,
  storedShardName,
} from '../../worker/shards/registry.ts';

export const GATEWAY_SECRET = 'test-gateway-secret';

/**
 * The D1 database holding an account's mail rows (emails, folders, its mail events …): its shard.
 * env.DB is the directory (accounts, API keys, endpoints, idempotency records, account.* events).
 */
export const accountDb = (accountId: string): Promise<D1Database> => mailDb(env, accountId);

export function folder(path: string, special_use: string | null, uidnext = 1, uidvalidity = 1): FolderInfo {
  return {
    path,
    delimiter: '/',
    flags: [],
    special_use,
    uidvalidity,
    uidnext,
    highest_modseq: '1',
    total: uidnext - 1,
  };
}

export const STANDARD_FOLDERS = (inboxNext = 1) => [
  folder('INBOX', null, inboxNext),
  folder('Sent', '\\Sent'),
  folder('Drafts', '\\Drafts'),
  folder('Trash', '\\Trash'),
  folder('Junk', '\\Junk'),
  folder('Archive', '\\Archive'),
  folder('Projects', null),
  folder('Projects/2026', null),
];

/** An account row plus an initialized Durable Object, as connecting would leave them. */
/**
 * A connected account with its folders, placed in a mail shard as connect places one (the shard with
 * the fewest accounts), or in the shard named by `shard`.
 */
export async function createSyncedAccount(
  email = `alice-${crypto.randomUUID().slice(0, 8)}@example.test`,
  folders = STANDARD_FOLDERS(),
  options: { shard?: string } = {},
) {
  const id = newId('account');
  const now = new Date().toISOString();
  const shard = options.shard === undefined ? await chooseShard(env) : shardByName(env, options.shard);
  await env.DB.prepare(
    `INSERT INTO accounts (id, email, user_id, imap_host, imap_port, imap_encryption, smtp_host, smtp_port, smtp_encryption, smtp_user,
       credentials, created_at, connected_at, updated_at, shard)
     VALUES (?, ?, ?, '127.0.0.1', 993, 'SSL', '127.0.0.1', 465, 'SSL', ?, ?, ?, ?, ?, ?)`,
  )
    .bind(
      id,
      email,
      email,
      email,
      await sealPasswords(env, id, { imap_password: 'secret-imap', smtp_password: 'secret-smtp' }),
      now,
      now,
      now,
      storedShardName(shard),
    )
    .run();
  await markAccountInShard(shard, id, now);
  const stub = accountObject(env, id);
  await stub.initialize({ account_id: id, email, user_id: email, connected_at_ms: Date.now() - 1000, folders });
  return { id, email, stub, db: shard.db };
}

export interface RawOptions {
  from?: string;
  to?: string;
  cc?: string;
  subject?: string;
  messageId?: string;
  inReplyTo?: string;
  references?: string;
  date?: string;
  text?: string;
  attachment?: { name: string; type: string; content: string };
}

export function rawMessage(o: RawOptions = {}): string {
  const headers = [
    `From: ${o.from ?? 'Bob Sender <bob@example.test>'}`,
    `To: ${o.to ?? 'Alice <alice@example.test>'}`,
    ...(o.cc ? [`Cc: ${o.cc}`] : []),
    `Subject: ${o.subject ?? 'Hello'}`,
    `Date: ${o.date ?? new Date().toUTCString()}`,
    `Message-ID: ${o.messageId ?? `<${crypto.randomUUID()}@example.test>`}`,
    ...(o.inReplyTo ? [`In-Reply-To: ${o.inReplyTo}`] : []),
    ...(o.references ? [`References: ${o.references}`] : []),
    'MIME-Version: 1.0',
  ];
  if (!o.attachment)
    return [...headers, 'Content-Type: text/plain; charset=utf-8', '', o.text ?? 'Hi there', ''].join('\r\n');
  const boundary = 'b-' + crypto.randomUUID();
  return [
    ...headers,
    `Content-Type: multipart/mixed; boundary="${boundary}"`,
    '',
    `--${boundary}`,
    'Content-Type: text/plain; charset=utf-8',
    '',
    o.text ?? 'See attached',
    `--${boundary}`,
    `Content-Type: ${o.attachment.type}; name="${o.attachment.name}"`,
    `Content-Disposition: attachment; filename="${o.attachment.name}"`,
    'Content-Transfer-Encoding: base64',
    '',
    btoa(o.attachment.content),
    `--${boundary}--`,
    '',
  ].join('\r\n');
}

export function messageIn(uid: number, raw: string, flags: string[] = []): MessageIn {
  const bytes = new TextEncoder().encode(raw);
  let binary = '';
  for (const b of bytes) binary += String.fromCharCode(b);
  return { uid, flags, internal_date: new Date().toISOString(), size: bytes.length, raw: btoa(binary) };
}

/** A signed call to the Worker's gateway endpoints, as the gateway makes it. */
const app = createApp();

/** A signed gateway call through the app with `callEnv` (a metered env counts what it costs; another env, other keys). */
export async function gatewayCallWith(callEnv: Env, path: string, body: unknown) {
  const text = JSON.stringify(body);
  const signature = await signRequest(GATEWAY_SECRET, { method: 'POST', path, body: text });
  const ctx = createExecutionContext();
  const response = await app.fetch(
    new Request(`https://mail.example.com${path}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', [GATEWAY_SIGNATURE_HEADER]: signature },
      body: text,
    }),
    callEnv,
    ctx,
  );
  await waitOnExecutionContext(ctx);
  return { status: response.status, body: (await response.json()) as any };
}

export async function gatewayCall(path: string, body: unknown, secret = GATEWAY_SECRET) {
  const text = JSON.stringify(body);
  const signature = await signRequest(secret, { method: 'POST', path, body: text });
  const response = await exports.default.fetch(`https://mail.example.com${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', [GATEWAY_SIGNATURE_HEADER]: signature },
    body: text,
  });
  return { status: response.status, body: (await response.json()) as any };
}

/**
 * The account's events with their data as a webhook call or the feed gives it (worker/emails/event-data.ts):
 * its mail events from its shard and its account.* events from the directory, in the order they were made.
 */
export async function outbox(accountId: string): Promise<{ type: string; data: any }[]> {
  const shard = await accountShard(env, accountId);
  const dbs = shard.name === DIRECTORY_SHARD ? [shard.db] : [shard.db, env.DB];
  const rows = [];
  for (const db of dbs) {
    const { results } = await db
      .prepare('SELECT type, data_json, created_at FROM events WHERE account_id = ? ORDER BY created_at, rowid')
      .bind(accountId)
      .all<{ type: string; data_json: string; created_at: string }>();
    rows.push(...(await completeEmailEvents(db, results, 'data_json')));
  }
  // A stable sort: each database's rows keep their order within one created_at.
  rows.sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : 0));
  return rows.map((r) => ({ type: r.type, data: JSON.parse(r.data_json) }));
}

/**
 * What the holding gateway does while emails wait in no folder: a pass over every folder, begun
 * after they left, reported as `passed`; then the account object's alarm deletes what that covers.
 */
export async function readEveryFolder(stub: DurableObjectStub<AccountObject>): Promise<void> {
  const holder = (await stub.currentLease())?.gateway_id;
  if (!holder) throw new Error('nobody holds the account');
  const { mark } = await stub.orphanState();
  const cursors = await stub.cursors();
  const folders = cursors.map((c) => ({ path: c.path, uidvalidity: c.uidvalidity, started: mark }));
  await stub.applyChanges(holder, [{ type: 'passed', listed: mark, folders }]);
  await runDurableObjectAlarm(stub);
}

/** A synced account whose lease `gateway` holds (it has just heartbeat: its lease is live). */
export async function leased(gateway = 'gw-1') {
  await env.DB.prepare(
    `INSERT INTO gateways (id, connected, connected_at, last_seen_ms) VALUES (?1, 0, ?2, ?3)
     ON CONFLICT (id) DO UPDATE SET last_seen_ms = excluded.last_seen_ms`,
  )
    .bind(gateway, new Date().toISOString(), Date.now())
    .run();
  const account = await createSyncedAccount();
  const lease = await account.stub.acquireLease(gateway);
  if (!lease.granted) throw new Error(`lease refused to ${gateway}`);
  return { ...account, gateway };
}

/** GET /emails with a query string: the response body. */
export const list = async (query: string) => (await api('GET', `/emails?${query}`)).body;
