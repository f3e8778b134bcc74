/**
 * Connecting a mailbox (POST /auth/intent): validate, let a gateway log in to IMAP and SMTP, then
 * create (or update, for a reconnect) the account with its encrypted passwords, its folders and
 * its sync baseline. Nothing is written before the login succeeded, and a failure after the
 * account row exists removes it again: no half-written account.
 */
import { NOT_REMOVED } from './removed.ts';
import { z } from 'zod';
import { Encryption, VerifyResult, type MailboxConfig } from '../../common/relay.ts';
import type { Env } from '../env.ts';
import { dispatchEvents, eventStatement, newEvent } from '../events/outbox.ts';
import { callAnyGateway, notifyGateway } from '../gateways/registry.ts';
import { ApiError } from '../lib/errors.ts';
import { newId, parseId } from '../lib/ids.ts';
import { isoNow } from '../lib/time.ts';
import { anyCase, singleLine } from '../lib/validation.ts';
import { sealPasswords } from './credentials.ts';
import { ACCOUNT_COLUMNS, presentAccount, type AccountRow } from './present.ts';
import { defaultEncryption, providerDefaults } from './providers.ts';
import { accountObject } from '../durable/account-stub.ts';
import { AccountMetadata } from './metadata.ts';
import { checkMailServers, sameUnreachableError } from './mail-hosts.ts';
import { accountShard, chooseShard, markAccountInShard, storedShardName } from '../shards/registry.ts';

const port = z
  .number()
  .int()
  .min(1, 'must be a port number from 1 to 65535')
  .max(65535, 'must be a port number from 1 to 65535');
const host = singleLine('host').pipe(z.string().trim().min(1, 'must not be empty').max(255));

export const AuthIntentBody = z.strictObject({
  provider: anyCase(['imap'], 'must be "imap"'),
  email: z.email('must be an email address').max(320),
  password: z.string().min(1, 'must not be empty').max(1024),
  imap_host: host.optional(),
  imap_port: port.optional(),
  imap_encryption: anyCase(Encryption.options).optional(),
  imap_user: singleLine('imap_user').pipe(z.string().min(1).max(320)).optional(),
  smtp_host: host.optional(),
  smtp_port: port.optional(),
  smtp_encryption: anyCase(Encryption.options).optional(),
  smtp_user: singleLine('smtp_user').pipe(z.string().min(1).max(320)).optional(),
  smtp_password: z.string().min(1).max(1024).optional(),
  display_name: singleLine('display_name').pipe(z.string().max(200)).optional(),
  state: z.string().max(1000).optional(),
  account_id: z.string().optional(),
  initial_sync_enable: z.boolean().optional(),
  initial_sync_days: z
    .number()
    .int()
    .min(1, 'must be an integer from 1 to 30')
    .max(30, 'must be an integer from 1 to 30')
    .optional(),
  metadata: AccountMetadata.optional(),
});

export type AuthIntent = z.infer<typeof AuthIntentBody>;

/** `initial_sync_enable` without `initial_sync_days`: the longest window. */
const DEFAULT_INITIAL_SYNC_DAYS = 30;
const DAY_MS = 24 * 3600 * 1000;

/** Complete server settings: given values, else the well-known provider's, else 400 naming what is missing. */
export function resolveServers(body: AuthIntent): MailboxConfig {
  const known = providerDefaults(body.email);
  const imapHost = body.imap_host ?? known?.imap.host;
  const smtpHost = body.smtp_host ?? known?.smtp.host;
  if (!imapHost)
    throw new ApiError(
      'invalid_parameters',
      `imap_host: required, because ${body.email.split('@')[1]} is not a provider we know`,
    );
  if (!smtpHost)
    throw new ApiError(
      'invalid_parameters',
      `smtp_host: required, because ${body.email.split('@')[1]} is not a provider we know`,
    );
  const imapPort = body.imap_port ?? (body.imap_host ? 993 : known!.imap.port);
  const smtpPort = body.smtp_port ?? (body.smtp_host ? 465 : known!.smtp.port);
  const imapUser = body.imap_user ?? body.email;
  return {
    email: body.email,
    display_name: body.display_name ?? null,
    imap: {
      host: imapHost,
      port: imapPort,
      encryption:
        body.imap_encryption ??
        (body.imap_host || body.imap_port ? defaultEncryption(imapPort) : known!.imap.encryption),
      user: imapUser,
      password: body.password,
    },
    smtp: {
      host: smtpHost,
      port: smtpPort,
      encryption:
        body.smtp_encryption ??
        (body.smtp_host || body.smtp_port ? defaultEncryption(smtpPort) : known!.smtp.encryption),
      user: body.smtp_user ?? imapUser,
      password: body.smtp_password ?? body.password,
    },
  };
}

async function loadAccountRow(env: Env, id: string): Promise<AccountRow | null> {
  return env.DB.prepare(`SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE id = ? AND ${NOT_REMOVED}`)
    .bind(id)
    .first<AccountRow>();
}

export async function connectAccount(env: Env, body: AuthIntent) {
  const config = resolveServers(body);
  checkMailServers(env, config);
  const reconnectId = body.account_id === undefined ? null : parseId('account', body.account_id);
  if (body.account_id !== undefined && !reconnectId) throw new ApiError('not_found', 'Account not found');
  const previous = reconnectId ? await loadAccountRow(env, reconnectId) : null;
  if (reconnectId && !previous) throw new ApiError('not_found', 'Account not found');

  if (!previous) {
    const duplicate = await env.DB.prepare(
      `SELECT id FROM accounts WHERE lower(email) = lower(?) AND lower(imap_host) = lower(?) AND ${NOT_REMOVED}`,
    )
      .bind(config.email, config.imap.host)
      .first<{ id: string }>();
    if (duplicate) {
      throw new ApiError(
        'already_exists',
        `This mailbox is already connected as account ${duplicate.id}; pass account_id to reconnect it.`,
      );
    }
  }

  // The gateway logs in to IMAP and SMTP and lists the folders; nothing is stored before that worked.
  // The connect time is taken before: mail that arrives while the gateway logs in is mail after the
  // connect, which a later re-read of a renumbered folder keeps (worker/sync/messages.ts).
  const now = Date.now();
  const { gatewayId, result } = await callAnyGateway(env, { op: 'verify', config }).catch((err: unknown) => {
    throw sameUnreachableError(err);
  });
  const { folders } = VerifyResult.parse(result);

  const nowIso = isoNow();
  const accountId = previous?.id ?? newId('account');
  const credentials = await sealPasswords(env, accountId, {
    imap_password: config.imap.password,
    smtp_password: config.smtp.password,
  });
  const settings = (displayName: string | null) => [
    config.email,
    displayName,
    config.imap.user,
    config.imap.host,
    config.imap.port,
    config.imap.encryption,
    config.smtp.host,
    config.smtp.port,
    config.smtp.encryption,
    config.smtp.user,
    credentials,
  ];

  const metadataJson = body.metadata ? JSON.stringify(body.metadata) : null;
  // A new account's mail goes to the shard holding the fewest accounts; a reconnect keeps its shard.
  const shard = previous ? await accountShard(env, accountId) : await chooseShard(env);
  let row: AccountRow;
  let write: D1PreparedStatement;
  if (previous) {
    row = {
      ...previous,
      email: config.email,
      display_name: config.display_name ?? previous.display_name,
      user_id: config.imap.user,
      status: 'running',
      last_error: null,
      state: body.state ?? previous.state,
      metadata_json: metadataJson ?? previous.metadata_json,
      connected_at: nowIso,
    };
    write = env.DB.prepare(
      `UPDATE accounts SET email = ?, display_name = ?, user_id = ?, imap_host = ?, imap_port = ?, imap_encryption = ?,
         smtp_host = ?, smtp_port = ?, smtp_encryption = ?, smtp_user = ?, credentials = ?, status = 'running', last_error = NULL,
         state = ?, metadata_json = ?, connected_at = ?, updated_at = ?, gateway_id = NULL
       WHERE id = ?`,
    ).bind(...settings(row.display_name), row.state, row.metadata_json, nowIso, nowIso, accountId);
  } else {
    row = {
      id: accountId,
      provider: 'imap',
      email: config.email,
      display_name: config.display_name,
      user_id: config.imap.user,
      status: 'running',
      is_locked: 0,
      initial_sync: 'none',
      initial_sync_enable: body.initial_sync_enable ? 1 : 0,
      initial_sync_days: body.initial_sync_days ?? (body.initial_sync_enable ? DEFAULT_INITIAL_SYNC_DAYS : null),
      metadata_json: metadataJson,
      state: body.state ?? null,
      created_at: nowIso,
      connected_at: nowIso,
      last_error: null,
    };
    write = env.DB.prepare(
      `INSERT INTO accounts (email, display_name, user_id, imap_host, imap_port, imap_encryption, smtp_host, smtp_port, smtp_encryption,
         smtp_user, credentials, id, provider, status, initial_sync, initial_sync_enable, initial_sync_days, metadata_json, state,
         created_at, connected_at, updated_at, shard)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'imap', 'running', 'none', ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).bind(
      ...settings(row.display_name),
      accountId,
      row.initial_sync_enable,
      row.initial_sync_days,
      row.metadata_json,
      row.state,
      nowIso,
      nowIso,
      nowIso,
      storedShardName(shard),
    );
  }

  // The account and its event in one batch.
  const account = presentAccount(row);
  const event = newEvent(previous ? 'account.reconnect' : 'account.add', accountId, account);
  await env.DB.batch([write, eventStatement(env.DB, event)]);

  const stub = accountObject(env, accountId);
  if (previous) {
    // Whoever synced with the old credentials lets go; the next lease hands out the new ones.
    const holder = await stub.dropLease();
    if (holder) await notifyGateway(env, holder, { op: 'release', account_id: accountId });
  } else {
    try {
      await markAccountInShard(shard, accountId, nowIso);
      const initialSyncSince = row.initial_sync_enable ? now - row.initial_sync_days! * DAY_MS : null;
      await stub.initialize({
        account_id: accountId,
        email: config.email,
        user_id: config.imap.user,
        connected_at_ms: now,
        folders,
        initial_sync_since_ms: initialSyncSince,
      });
    } catch (err) {
      // Undo: no account without its sync baseline, and no event for an account that is not there.
      const mail = shard.db;
      await mail.batch([
        mail.prepare('DELETE FROM folders WHERE account_id = ?').bind(accountId),
        mail.prepare('DELETE FROM events WHERE account_id = ?').bind(accountId),
        mail.prepare('DELETE FROM accounts WHERE id = ?').bind(accountId),
      ]);
      await env.DB.batch([
        env.DB.prepare('DELETE FROM events WHERE id = ?').bind(event.id),
        env.DB.prepare('DELETE FROM accounts WHERE id = ?').bind(accountId),
      ]);
      throw err;
    }
  }
  await dispatchEvents(env, [event.id]);
  // The gateway that just logged in starts syncing now rather than at its next heartbeat.
  await notifyGateway(env, gatewayId, { op: 'claim', account_id: accountId });
  return account;
}
