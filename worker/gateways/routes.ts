/**
 * The Worker's side of the relay protocol (common/relay.ts): endpoints the gateway calls, each
 * authenticated by an HMAC signature with GATEWAY_SECRET and a one-time nonce (auth.ts), plus the
 * gateway's control WebSocket.
 */
import { mailDb } from '../shards/registry.ts';
import { Hono, type Context } from 'hono';
import type { z } from 'zod';
import { GATEWAY_ID_IN_USE_TYPE, LEASE_LOST_TYPE, OUT_OF_ORDER_TYPE } from '../../common/relay-limits.ts';
import {
  ChangesRequest,
  HeartbeatRequest,
  LeaseRequest,
  ReleaseRequest,
  SendOutcome,
  StagedUploadComplete,
  StatusRequest,
  type LeaseResponse,
  type StagedPart,
  type StagedUpload,
  type MailboxConfig,
} from '../../common/relay.ts';
import type { AppEnv } from '../env.ts';
import { openPasswords } from '../accounts/credentials.ts';
import { leaseTtlMs, type HolderResult } from '../durable/lease.ts';
import { ApiError } from '../lib/errors.ts';
import { readSignedBody, signedSha256 } from './auth.ts';
import { countHeld, heartbeat, ownerOf, registerGateway, releaseLeases } from './fleet.ts';
import { notifyGateway } from './registry.ts';
import { parseId } from '../lib/ids.ts';
import { parseOrThrow } from '../lib/validation.ts';
import { OUTGOING_NAME, outgoingBlobKey, settleOutgoing } from '../send/outgoing.ts';
import { settleUnknownSchedule } from '../send/scheduled.ts';
import { blobKeys } from '../emails/store.ts';
import { accountObject } from '../durable/account-stub.ts';
import type { AppliedChanges } from '../durable/account-object.ts';
import { prepareChanges } from '../sync/prepare.ts';
import { gatewayObject } from '../durable/gateway-stub.ts';

interface AccountSecretsRow {
  id: string;
  email: string;
  display_name: string | null;
  user_id: string;
  imap_host: string;
  imap_port: number;
  imap_encryption: 'SSL' | 'STARTTLS' | 'NONE';
  smtp_host: string;
  smtp_port: number;
  smtp_encryption: 'SSL' | 'STARTTLS' | 'NONE';
  smtp_user: string;
  credentials: string;
}

/** The R2 key of the staged source the path names. */
function stagedKey(c: Context<AppEnv>): string {
  const sha256 = c.req.param('sha256') ?? '';
  if (!/^[0-9a-f]{64}$/.test(sha256)) throw new ApiError('not_found', 'No such source');
  return blobKeys.staged(accountIdParam(c), sha256);
}

/** The signed JSON body of a gateway call (auth.ts checked the signature), validated. */
async function signedBody<S extends z.ZodType>(c: Context<AppEnv>, schema: S): Promise<z.output<S>> {
  const body = new TextDecoder().decode(await readSignedBody(c));
  try {
    return parseOrThrow(schema, JSON.parse(body));
  } catch (err) {
    if (err instanceof ApiError) throw err;
    throw new ApiError('invalid_parameters', 'body: malformed JSON');
  }
}

function accountIdParam(c: Context<AppEnv>): string {
  const id = parseId('account', c.req.param('id'));
  if (!id) throw new ApiError('not_found', 'Account not found');
  return id;
}

async function mailboxConfig(c: Context<AppEnv>, row: AccountSecretsRow): Promise<MailboxConfig> {
  const passwords = await openPasswords(c.env, row.id, row.credentials);
  return {
    email: row.email,
    display_name: row.display_name,
    imap: {
      host: row.imap_host,
      port: row.imap_port,
      encryption: row.imap_encryption,
      user: row.user_id,
      password: passwords.imap_password,
    },
    smtp: {
      host: row.smtp_host,
      port: row.smtp_port,
      encryption: row.smtp_encryption,
      user: row.smtp_user,
      password: passwords.smtp_password,
    },
  };
}

const leaseLost = (detail: string) =>
  Response.json({ status: 409, type: LEASE_LOST_TYPE, title: 'Lease lost', detail }, { status: 409 });

/**
 * A source staged for a removed account would outlive its purge: refused (the gateway drops the
 * account, as for a lost lease). Null when the account is live.
 */
async function refusedForRemoved(c: Context<AppEnv>): Promise<Response | null> {
  const live = await c.env.DB.prepare('SELECT 1 AS live FROM accounts WHERE id = ? AND removed_at_ms IS NULL')
    .bind(accountIdParam(c))
    .first<{ live: number }>();
  return live ? null : leaseLost('the account was removed');
}

/**
 * A 409 when another live process uses the caller's gateway id (fleet.ts `registerGateway`), else
 * null. An owner without a live control socket (killed, then restarted with the same GATEWAY_ID)
 * is taken over at once rather than after a lease time: that costs one call to its object, only then.
 */
async function ownershipRefused(
  c: Context<AppEnv>,
  caller: { gateway_id: string; instance: string; capacity?: number },
): Promise<Response | null> {
  if (await registerGateway(c.env, caller)) return null;
  const owner = await ownerOf(c.env, caller.gateway_id);
  const ownerAlive = owner !== null && (await gatewayObject(c.env, caller.gateway_id).liveInstance()) === owner;
  if (!ownerAlive && (await registerGateway(c.env, caller, owner))) return null;
  const detail = `Gateway id ${caller.gateway_id} is used by another live gateway process; give each process its own GATEWAY_ID (or none: the default is unique).`;
  return Response.json(
    { status: 409, type: GATEWAY_ID_IN_USE_TYPE, title: 'Gateway id in use', detail },
    { status: 409 },
  );
}

export const gatewayRoutes = new Hono<AppEnv>()
  // The control WebSocket: a signed GET (headers, one-time nonce) naming the gateway and its process
  // in its query. Only the process that owns the id reaches the gateway's object, so no other process
  // (an impostor, or a second one started with the same GATEWAY_ID) can take its place.
  .get('/connect', async (c) => {
    const gatewayId = c.req.query('gateway_id') ?? '';
    const instance = c.req.query('instance') ?? '';
    if (!gatewayId || gatewayId.length > 100 || !instance || instance.length > 100)
      throw new ApiError('invalid_parameters', 'gateway_id and instance: required');
    const refused = await ownershipRefused(c, { gateway_id: gatewayId, instance });
    if (refused) return refused;
    return gatewayObject(c.env, gatewayId).fetch(c.req.raw);
  })

  .post('/heartbeat', async (c) => {
    const request = await signedBody(c, HeartbeatRequest);
    const refused = await ownershipRefused(c, request);
    if (refused) return refused;
    return c.json(await heartbeat(c.env, request));
  })

  // Leases given up at once (a stopping gateway, or surplus handed over); the live gateways are told
  // to heartbeat now and take them.
  .post('/release', async (c) => {
    const request = await signedBody(c, ReleaseRequest);
    const refused = await ownershipRefused(c, request);
    if (refused) return refused;
    const others = await releaseLeases(c.env, request);
    c.executionCtx.waitUntil(
      Promise.allSettled(others.map((id) => notifyGateway(c.env, id, { op: 'rebalance' }))).then(() => undefined),
    );
    return c.json({ ok: true });
  })

  .post('/accounts/:id/lease', async (c) => {
    const { gateway_id, instance } = await signedBody(c, LeaseRequest);
    const accountId = accountIdParam(c);
    const row = await c.env.DB.prepare(
      `SELECT id, email, display_name, user_id, imap_host, imap_port, imap_encryption, smtp_host, smtp_port, smtp_encryption, smtp_user, credentials
       FROM accounts WHERE id = ?`,
    )
      .bind(accountId)
      .first<AccountSecretsRow>();
    if (!row) throw new ApiError('not_found', 'Account not found');
    const stub = accountObject(c.env, accountId);
    const { granted, lease } = await stub.acquireLease(gateway_id, instance);
    if (!granted || !lease) {
      const refused: LeaseResponse = { granted: false, holder: lease?.gateway_id ?? null };
      return c.json(refused);
    }
    await countHeld(c.env, gateway_id);
    const response: LeaseResponse = {
      granted: true,
      account_id: accountId,
      config: await mailboxConfig(c, row),
      lease_ttl_ms: leaseTtlMs(c.env),
      ...(await stub.leaseState()),
    };
    return c.json(response);
  })

  .post('/accounts/:id/changes', async (c) => {
    const request = await signedBody(c, ChangesRequest);
    const accountId = accountIdParam(c);
    // Parsed here, off the object's one-change-at-a-time path (sync/prepare.ts).
    const { changes, prepared } = await prepareChanges(request.changes);
    const stub = accountObject(c.env, accountId);
    const result = (await stub.applyChanges(request.gateway_id, changes, request.sequence, prepared)) as
      | HolderResult<AppliedChanges>
      | { ok: false; out_of_order: string };
    if (result.ok) return c.json({ cursors: result.value.cursors, orphans: result.value.orphans });
    if ('out_of_order' in result)
      return c.json({ status: 409, type: OUT_OF_ORDER_TYPE, title: 'Out of order', detail: result.out_of_order }, 409);
    return leaseLost(result.lease_lost);
  })

  // A large message source, ahead of the change that names it (common/relay.ts `MessageIn.staged`). The
  // signature declares the SHA-256 in the path, and R2 refuses a body with another SHA-256, so the body
  // streams into R2 without being read here first (an object holds 128 MB).
  .put('/accounts/:id/sources/:sha256', async (c) => {
    const sha256 = c.req.param('sha256');
    if (!/^[0-9a-f]{64}$/.test(sha256)) throw new ApiError('not_found', 'No such source');
    if (signedSha256(c) !== sha256) throw new ApiError('unauthorized', 'The signature covers another source.');
    const length = Number(c.req.header('content-length'));
    if (!c.req.raw.body || !Number.isSafeInteger(length) || length <= 0)
      throw new ApiError('invalid_parameters', 'content-length: a staged source needs its length');
    const refused = await refusedForRemoved(c);
    if (refused) return refused;
    await c.env.BLOBS.put(blobKeys.staged(accountIdParam(c), sha256), c.req.raw.body, {
      sha256,
      httpMetadata: { contentType: 'message/rfc822' },
    });
    return c.json({ ok: true });
  })

  // A very large source in parts (R2 multipart upload, `STAGE_PART_BYTES` a part): no call carries
  // more than a part, and no invocation holds more than one.
  .post('/accounts/:id/sources/:sha256/uploads', async (c) => {
    await readSignedBody(c);
    const refused = await refusedForRemoved(c);
    if (refused) return refused;
    const upload = await c.env.BLOBS.createMultipartUpload(stagedKey(c), {
      httpMetadata: { contentType: 'message/rfc822' },
    });
    const answer: StagedUpload = { upload_id: upload.uploadId };
    return c.json(answer);
  })
  .put('/accounts/:id/sources/:sha256/uploads/:upload/:part', async (c) => {
    const part = Number(c.req.param('part'));
    if (!Number.isInteger(part) || part < 1 || part > 10_000) throw new ApiError('not_found', 'No such part');
    const bytes = await readSignedBody(c);
    if (bytes.byteLength === 0) throw new ApiError('invalid_parameters', 'body: a part needs bytes');
    const upload = c.env.BLOBS.resumeMultipartUpload(stagedKey(c), c.req.param('upload'));
    const uploaded = await upload.uploadPart(part, bytes);
    const answer: StagedPart = { etag: uploaded.etag };
    return c.json(answer);
  })
  .post('/accounts/:id/sources/:sha256/uploads/:upload/complete', async (c) => {
    const { parts } = await signedBody(c, StagedUploadComplete);
    const refused = await refusedForRemoved(c);
    if (refused) return refused;
    const key = stagedKey(c);
    const upload = c.env.BLOBS.resumeMultipartUpload(key, c.req.param('upload'));
    try {
      await upload.complete(parts.map((p) => ({ partNumber: p.part, etag: p.etag })));
    } catch (err) {
      // A retried call whose first attempt completed it (its answer was lost): the source is there.
      if (!(await c.env.BLOBS.head(key))) throw err;
    }
    return c.json({ ok: true });
  })

  // A composed message waiting to be sent (see the `send` request): a signed GET with an empty body.
  .get('/accounts/:id/outgoing/:name', async (c) => {
    const name = c.req.param('name');
    const object = OUTGOING_NAME.test(name) ? await c.env.BLOBS.get(outgoingBlobKey(accountIdParam(c), name)) : null;
    if (!object) throw new ApiError('not_found', 'No such outgoing message');
    return new Response(object.body, { headers: { 'Content-Type': 'application/json' } });
  })

  // The late outcome of a send the Worker may have stopped waiting for (send/idempotency.ts).
  .post('/accounts/:id/outcomes', async (c) => {
    const { message_id, sent, detail } = await signedBody(c, SendOutcome);
    const accountId = accountIdParam(c);
    // Settled only now: the send's outcome was unknown until this report, its schedule's too.
    const mail = await mailDb(c.env, accountId);
    if (await settleOutgoing(mail, accountId, message_id, sent ? 'sent' : 'failed', detail))
      await settleUnknownSchedule(mail, accountId, message_id, sent, detail);
    return c.json({ ok: true });
  })

  .post('/accounts/:id/status', async (c) => {
    const { gateway_id, status, error } = await signedBody(c, StatusRequest);
    const accountId = accountIdParam(c);
    const result = (await accountObject(c.env, accountId).reportStatus(
      gateway_id,
      status,
      error,
    )) as HolderResult<null>;
    return result.ok ? c.json({ ok: true }) : leaseLost(result.lease_lost);
  });
