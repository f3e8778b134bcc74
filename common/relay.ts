/**
 * The relay protocol between the gateway (Node) and the Worker: the one definition both sides import.
 *
 * Gateway → Worker: signed HTTP POSTs under /internal/gateway/ (see `signing.ts`), JSON bodies
 * validated with the schemas below.
 *   POST /internal/gateway/heartbeat                    HeartbeatRequest        → HeartbeatResponse
 *   POST /internal/gateway/release                      ReleaseRequest          → { ok: true }
 *   POST /internal/gateway/accounts/{id}/lease          LeaseRequest            → LeaseResponse
 *   POST /internal/gateway/accounts/{id}/changes        ChangesRequest          → ChangesResponse
 *   POST /internal/gateway/accounts/{id}/status         StatusRequest           → { ok: true }
 *   GET  /internal/gateway/accounts/{id}/outgoing/{key}  (empty body signed)     → OutgoingMessage
 *   PUT  /internal/gateway/accounts/{id}/sources/{sha256} a large message source → { ok: true }
 *   POST /internal/gateway/accounts/{id}/sources/{sha256}/uploads  (empty)   → StagedUpload
 *   PUT  …/sources/{sha256}/uploads/{upload}/{part}     one part of a very large source → StagedPart
 *   POST …/sources/{sha256}/uploads/{upload}/complete   StagedUploadComplete    → { ok: true }
 *   POST /internal/gateway/accounts/{id}/outcomes       SendOutcome             → { ok: true }
 *
 * Worker → Gateway: each gateway keeps one WebSocket open to the Worker
 *   GET  /internal/gateway/connect?gateway_id=…&instance=…   (signed in headers, like every call)
 * on which the Worker sends `WorkerToGateway` requests and the gateway answers with
 * `GatewayToWorker` responses carrying the same `id`.
 *
 * Nothing here is durable on the gateway: it learns where each account stopped from the lease
 * response (`cursors`) and reports progress with every change batch. The account data (settings,
 * folders, messages, changes, cursors) is in relay-mail.ts, re-exported here; the protocol's constants are
 * in relay-limits.ts; the gateway checks what it receives against JSON Schemas generated from the
 * schemas below (gateway/relay-checks.ts), so it never loads zod.
 */
import { z } from 'zod';
import { Change, FolderCursor, FolderInfo, MailboxConfig } from './relay-mail.ts';

export * from './relay-mail.ts';

// ---------------------------------------------------------------------------------------------
// Gateway → Worker (HTTP)

/**
 * Who is calling: the gateway id (GATEWAY_ID, or a unique default per process) and the process's
 * random instance id. An id belongs to one live process at a time: calls from another instance are
 * refused (409 `GATEWAY_ID_IN_USE_TYPE`) until the owner stops or stays silent for a lease time.
 */
const Caller = {
  gateway_id: z.string().min(1).max(100),
  instance: z.string().min(1).max(100),
};

export const HeartbeatRequest = z.object({
  ...Caller,
  /** Accounts this gateway is syncing now: their leases are renewed. */
  held: z.array(z.string()),
  /** The most accounts this gateway takes (GATEWAY_CAPACITY). */
  capacity: z.number().int().positive(),
  /** The gateway's version, shown in GET /gateways. */
  version: z.string().max(50).optional(),
});
export type HeartbeatRequest = z.infer<typeof HeartbeatRequest>;

export const HeartbeatResponse = z.object({
  /** Held accounts whose lease could not be renewed (taken over, or the account was removed): stop them. */
  lost: z.array(z.string()),
  /** Accounts nobody holds, as many as this gateway's share lacks: try to lease them. */
  claimable: z.array(z.string()),
  /** Held accounts beyond this gateway's share: stop them and release them (`ReleaseRequest`), for others to take. */
  release: z.array(z.string()),
  /** Milliseconds a lease lasts; heartbeat well within it. */
  lease_ttl_ms: z.number().int().positive(),
});
export type HeartbeatResponse = z.infer<typeof HeartbeatResponse>;

/**
 * The initial sync still to do: mail of each folder with a UID below `below_uid` (UIDs from before
 * the account connected, minus what was already pulled) and an INTERNALDATE at or after `since`.
 * Pulled highest UID first, in pages; `below_uid` falls as pages are applied, so a new gateway resumes.
 */
export const InitialSyncPlan = z.object({
  since: z.string(),
  folders: z.array(
    z.object({
      path: z.string(),
      uidvalidity: z.number().int().nonnegative(),
      below_uid: z.number().int().nonnegative(),
    }),
  ),
});
export type InitialSyncPlan = z.infer<typeof InitialSyncPlan>;

/**
 * Emails that left their last folder wait for evidence, not for a timer: one is deleted once every
 * folder of the account has been read through by a pass that began after it left (the other side of
 * a move may arrive any time later). `mark` grows with every batch that leaves emails in no folder:
 * a pass that begins once the gateway was told a mark began after every email marked up to it left.
 * `waiting`: some email waits; the gateway then passes over every folder and reports `passed`.
 */
export const OrphanState = z.object({ mark: z.number().int().nonnegative(), waiting: z.boolean() });
export type OrphanState = z.infer<typeof OrphanState>;

export const LeaseRequest = z.object(Caller);
export type LeaseRequest = z.infer<typeof LeaseRequest>;

/** Leases given up at once (a stopping gateway, or one handing over its surplus): others take them now. */
export const ReleaseRequest = z.object({
  ...Caller,
  accounts: z.array(z.string()),
  /** The gateway is stopping: it takes no more accounts and the others are told to take its share. */
  stopping: z.boolean(),
});
export type ReleaseRequest = z.infer<typeof ReleaseRequest>;

export const LeaseResponse = z.discriminatedUnion('granted', [
  z.object({
    granted: z.literal(true),
    account_id: z.string(),
    config: MailboxConfig,
    cursors: z.array(FolderCursor),
    lease_ttl_ms: z.number().int().positive(),
    /** Present while the account's initial sync has not finished. */
    initial_sync: InitialSyncPlan.optional(),
    orphans: OrphanState.optional(),
  }),
  z.object({ granted: z.literal(false), holder: z.string().nullable() }),
]);
export type LeaseResponse = z.infer<typeof LeaseResponse>;

/**
 * The place of a batch in its gateway's stream of batches for one account: the gateway keeps
 * several batches on their way, and the account's object applies batch `n` of a stream only after
 * `n - 1` (a later one waits for it; one that waited too long, or comes from a stream that a newer
 * one replaced, is refused with 409 `errors/out_of_order`, and the gateway starts a new stream). A
 * batch already applied (`n` at or below the last one) is answered without being applied again.
 *
 * `session`: the epoch of the gateway session that sent it (it grows with every session a gateway
 * process starts, and a restarted process starts above the old one): once a session of the holding
 * gateway has had a batch applied, a batch of an earlier session of that gateway is refused (409),
 * however late it arrives.
 */
export const ChangesSequence = z.object({
  stream: z.string().min(1).max(64),
  n: z.number().int().nonnegative(),
  session: z.number().int().nonnegative().optional(),
});
export type ChangesSequence = z.infer<typeof ChangesSequence>;

export const ChangesRequest = z.object({
  gateway_id: z.string().min(1).max(100),
  changes: z.array(Change).min(1),
  sequence: ChangesSequence.optional(),
});
export type ChangesRequest = z.infer<typeof ChangesRequest>;

export const ChangesResponse = z.object({
  /** The account's cursors after the batch was applied. */
  cursors: z.array(FolderCursor),
  orphans: OrphanState.optional(),
});
export type ChangesResponse = z.infer<typeof ChangesResponse>;

export const AccountStatus = z.enum(['running', 'errored', 'disconnected']);
export type AccountStatus = z.infer<typeof AccountStatus>;

export const StatusRequest = z.object({
  gateway_id: z.string().min(1).max(100),
  status: AccountStatus,
  /** A short, credential-free description of what went wrong, or null. */
  error: z.string().max(1000).nullable(),
});
export type StatusRequest = z.infer<typeof StatusRequest>;

// ---------------------------------------------------------------------------------------------
// Worker → Gateway (WebSocket)

/** One address of an outgoing message. */
export const OutgoingAddress = z.object({ address: z.string(), name: z.string() });
export type OutgoingAddress = z.infer<typeof OutgoingAddress>;

/** A message the Worker composed (validated, tracking applied), as the gateway fetches it. */
export const OutgoingMessage = z.object({
  message_id: z.string(),
  from: OutgoingAddress,
  to: z.array(OutgoingAddress),
  cc: z.array(OutgoingAddress),
  bcc: z.array(OutgoingAddress),
  subject: z.string(),
  html: z.string(),
  text: z.string(),
  in_reply_to: z.string().nullable(),
  references: z.array(z.string()),
  /** Only names the API allows (X-*, List-Unsubscribe, List-Unsubscribe-Post, Reply-To); single-line values. */
  headers: z.array(z.object({ name: z.string(), value: z.string() })),
  attachments: z.array(
    /** content_type null: guessed from the file name. */
    z.object({
      filename: z.string(),
      content_type: z.string().nullable(),
      cid: z.string().nullable(),
      content: z.string() /* base64 */,
    }),
  ),
});
export type OutgoingMessage = z.infer<typeof OutgoingMessage>;

/** A send or a saved draft: the Message-ID it went out with (its copy in Sent or Drafts arrives by sync). */
export const OutgoingResult = z.object({ message_id: z.string() });
export type OutgoingResult = z.infer<typeof OutgoingResult>;

/** A multipart upload of a very large source begun (`STAGE_PART_BYTES` a part, the last one shorter). */
export const StagedUpload = z.object({ upload_id: z.string().min(1).max(1000) });
export type StagedUpload = z.infer<typeof StagedUpload>;

/** One part stored. */
export const StagedPart = z.object({ etag: z.string().min(1).max(200) });
export type StagedPart = z.infer<typeof StagedPart>;

/** Every part of the upload, in order: the source is whole once this is applied. */
export const StagedUploadComplete = z.object({
  parts: z
    .array(z.object({ part: z.number().int().min(1).max(10_000), etag: z.string().min(1).max(200) }))
    .min(1)
    .max(10_000),
});
export type StagedUploadComplete = z.infer<typeof StagedUploadComplete>;

/**
 * What became of a send or draft, reported by the gateway once it knows, besides its answer on the
 * socket: the Worker may have stopped waiting, and must learn the outcome without sending again.
 */
export const SendOutcome = z.object({
  message_id: z.string().min(1).max(1000),
  sent: z.boolean(),
  detail: z.string().max(1000).nullable(),
});
export type SendOutcome = z.infer<typeof SendOutcome>;

/**
 * One mailbox change of a `modify` request; a message is addressed by folder path, UIDVALIDITY and
 * UID, and the gateway refuses a step whose folder was renumbered since.
 */
const At = { path: z.string(), uidvalidity: z.number().int().nonnegative(), uid: z.number().int().positive() };
export const ModifyStep = z.discriminatedUnion('type', [
  z.object({ type: z.literal('flags'), ...At, add: z.array(z.string()), remove: z.array(z.string()) }),
  z.object({ type: z.literal('copy'), ...At, destination: z.string() }),
  z.object({ type: z.literal('move'), ...At, destination: z.string() }),
  /** \Deleted, then an expunge of that one message only (UID EXPUNGE, or EXPUNGE when no other message is \Deleted). */
  z.object({ type: z.literal('delete'), ...At }),
]);
export type ModifyStep = z.infer<typeof ModifyStep>;

/** Per step, in order: the message's UID in the destination (COPYUID), null when the server did not say; null for other steps. */
export const ModifyResult = z.object({ uids: z.array(z.number().int().positive().nullable()) });
export type ModifyResult = z.infer<typeof ModifyResult>;

/**
 * A folder created, renamed (or moved: `new_path` under another parent; its subfolders follow) or
 * deleted on the server. Paths are the server's (the Worker joins names with the folder's delimiter).
 */
export const FolderAction = z.discriminatedUnion('type', [
  z.object({ type: z.literal('create'), path: z.string().min(1) }),
  z.object({ type: z.literal('rename'), path: z.string().min(1), new_path: z.string().min(1) }),
  z.object({ type: z.literal('delete'), path: z.string().min(1) }),
]);
export type FolderAction = z.infer<typeof FolderAction>;

/**
 * After a create or rename: the path the folder now has (the server's namespace prefix may have been
 * added) and its STATUS there, null when the server did not give it. After a delete: both null.
 */
export const FolderActionResult = z.object({
  path: z.string().nullable(),
  /** The gateway's stamp once the action was done: a folder listing that began later has a greater `began`. */
  listed_after: z.number().int().nonnegative().optional(),
  status: z
    .object({
      uidvalidity: z.number().int().nonnegative(),
      uidnext: z.number().int().nonnegative(),
      messages: z.number().int().nonnegative(),
    })
    .nullable(),
});
export type FolderActionResult = z.infer<typeof FolderActionResult>;

export const GatewayRequest = z.discriminatedUnion('op', [
  /** Log in to IMAP and SMTP with these settings; answer with the folder listing (the connect baseline). */
  z.object({ op: z.literal('verify'), config: MailboxConfig }),
  /** An account was added or reconnected: try to lease it now rather than at the next heartbeat. */
  z.object({ op: z.literal('claim'), account_id: z.string() }),
  /** The account was removed or reconnected elsewhere: stop syncing it at once. */
  z.object({ op: z.literal('release'), account_id: z.string() }),
  /** Leases were freed (a gateway stopped or handed over accounts): heartbeat now to take a share. */
  z.object({ op: z.literal('rebalance') }),
  /**
   * Send a message (mode `send`: SMTP, then APPEND the same bytes to `append_to`, skipped on Gmail)
   * or save a draft (mode `draft`: APPEND to `append_to` with \Draft). The message itself is too big
   * for a socket frame: the gateway fetches it with a signed GET of /internal/gateway/accounts/{id}/outgoing/{key}.
   * Answer: OutgoingResult.
   */
  z.object({
    op: z.literal('send'),
    account_id: z.string(),
    mode: z.enum(['send', 'draft']),
    key: z.string(),
    append_to: z.string().nullable(),
  }),
  /** Change messages in the mailbox, steps in order (flags first, then copies, moves, deletions). Answer: ModifyResult. */
  z.object({ op: z.literal('modify'), account_id: z.string(), steps: z.array(ModifyStep).min(1) }),
  /** Create, rename or delete a folder. Answer: FolderActionResult. */
  z.object({ op: z.literal('folder'), account_id: z.string(), action: FolderAction }),
]);
export type GatewayRequest = z.infer<typeof GatewayRequest>;

export const VerifyResult = z.object({ folders: z.array(FolderInfo) });
export type VerifyResult = z.infer<typeof VerifyResult>;

/** Error kinds a gateway reports; they map onto the public API's error types. */
export const GatewayErrorKind = z.enum([
  'invalid_credentials',
  'provider_error',
  'provider_rejected',
  'not_found',
  /** The server says the folder name is taken (ALREADYEXISTS). */
  'already_exists',
  'unexpected_error',
  // verify only: a mail host resolves to an address the gateway may not connect to; the detail names
  // the setting (`imap_host` or `smtp_host`), and the Worker answers as for that address written out.
  'private_host',
]);
export type GatewayErrorKind = z.infer<typeof GatewayErrorKind>;

export const WorkerToGateway = z.object({
  type: z.literal('request'),
  id: z.string(),
  request: GatewayRequest,
});
export type WorkerToGateway = z.infer<typeof WorkerToGateway>;

export const GatewayToWorker = z.discriminatedUnion('ok', [
  z.object({ type: z.literal('response'), id: z.string(), ok: z.literal(true), result: z.unknown() }),
  z.object({
    type: z.literal('response'),
    id: z.string(),
    ok: z.literal(false),
    error: z.object({
      kind: GatewayErrorKind,
      detail: z.string(),
      /** A send failed where the server may have taken the message anyway: its outcome is unknown. */
      may_have_sent: z.boolean().optional(),
    }),
  }),
]);
export type GatewayToWorker = z.infer<typeof GatewayToWorker>;
