/**
 * The relay protocol's account data (common/relay.ts): the mail server settings a gateway connects
 * with, the folders and messages it reports, the changes it sends and where each folder's sync stands.
 */
import { z } from 'zod';

// ---------------------------------------------------------------------------------------------
// Mail server settings, as the gateway needs them to connect (passwords in clear: they travel only
// inside signed requests to a gateway and live only in its memory).

export const Encryption = z.enum(['SSL', 'STARTTLS', 'NONE']);
export type Encryption = z.infer<typeof Encryption>;

export const ServerConfig = z.object({
  host: z.string().min(1),
  port: z.number().int().min(1).max(65535),
  encryption: Encryption,
  user: z.string().min(1),
  password: z.string(),
});
export type ServerConfig = z.infer<typeof ServerConfig>;

export const MailboxConfig = z.object({
  email: z.string(),
  display_name: z.string().nullable(),
  imap: ServerConfig,
  smtp: ServerConfig,
});
export type MailboxConfig = z.infer<typeof MailboxConfig>;

// ---------------------------------------------------------------------------------------------
// Folders and messages as the gateway reports them.

/** One IMAP mailbox, from LIST (with SPECIAL-USE) and STATUS. */
export const FolderInfo = z.object({
  path: z.string(),
  delimiter: z.string().nullable(),
  /** LIST flags, e.g. \HasNoChildren, \Noselect. */
  flags: z.array(z.string()),
  /** \Sent, \Drafts, \Trash, \Junk, \Archive, \All, \Important, \Flagged, \Inbox or null. */
  special_use: z.string().nullable(),
  uidvalidity: z.number().int().nonnegative(),
  uidnext: z.number().int().nonnegative(),
  highest_modseq: z.string().nullable(),
  /** Number of messages in the folder (STATUS MESSAGES). */
  total: z.number().int().nonnegative(),
});
export type FolderInfo = z.infer<typeof FolderInfo>;

/** A message the gateway fetched: envelope data plus the whole RFC 822 source. */
export const MessageIn = z.object({
  uid: z.number().int().positive(),
  flags: z.array(z.string()),
  /** Gmail only (X-GM-LABELS, X-GM-MSGID, X-GM-THRID as decimal strings). */
  labels: z.array(z.string()).optional(),
  gm_msgid: z.string().optional(),
  gm_thrid: z.string().optional(),
  /** INTERNALDATE, ISO 8601. */
  internal_date: z.string(),
  size: z.number().int().nonnegative(),
  /** The RFC 822 source, base64 (empty when the source was staged). */
  raw: z.string(),
  /**
   * A large source travels apart from the change (no base64 inside JSON, no copy in an RPC): the
   * gateway first PUTs it to /internal/gateway/accounts/{id}/sources/{sha256}, and names it here
   * by its SHA-256 (hex).
   */
  staged: z
    .string()
    .regex(/^[0-9a-f]{64}$/)
    .optional(),
  /**
   * The message is larger than the gateway takes (`GATEWAY_MAX_MESSAGE_BYTES`): `raw` holds only its
   * header block and `size` is the whole message's. It is listed from its headers, without a body.
   */
  too_large: z.literal(true).optional(),
});
export type MessageIn = z.infer<typeof MessageIn>;

export const FlagUpdate = z.object({
  uid: z.number().int().positive(),
  flags: z.array(z.string()),
  labels: z.array(z.string()).optional(),
});
export type FlagUpdate = z.infer<typeof FlagUpdate>;

/**
 * One change, applied in order. Every change is idempotent: the same batch applied twice leaves
 * the same state and emits each event once.
 */
export const Change = z.discriminatedUnion('type', [
  /**
   * The complete folder listing: new folders are created, missing ones deleted, counts updated.
   * `began`: the gateway's stamp (gateway/stamps.ts) taken as the listing began; it is above the
   * `listed_after` of every folder action the gateway finished before, so the Worker knows whether
   * the listing can show what such an action took away.
   */
  z.object({
    type: z.literal('folders'),
    folders: z.array(FolderInfo),
    began: z.number().int().nonnegative().optional(),
  }),
  /** Messages that appeared in a folder (new mail, or the destination side of a move). */
  z.object({
    type: z.literal('messages'),
    path: z.string(),
    uidvalidity: z.number().int().nonnegative(),
    messages: z.array(MessageIn),
    /**
     * Older mail pulled by the initial sync (see `InitialSyncPlan`): accepted below the folder's
     * cursor when its INTERNALDATE is inside the window; the cursor itself does not move.
     */
    initial_sync: z.boolean().optional(),
    /**
     * Expunges the gateway has seen but not reported yet (it reports a move's arrival first): a
     * message arriving here that has identical copies is the one leaving one of these places.
     */
    vanishing: z
      .array(z.object({ path: z.string(), uidvalidity: z.number().int(), uids: z.array(z.number().int()) }))
      .optional(),
  }),
  /** Flags (and Gmail labels) of messages already known. */
  z.object({
    type: z.literal('flags'),
    path: z.string(),
    uidvalidity: z.number().int().nonnegative(),
    updates: z.array(FlagUpdate),
  }),
  /** UIDs expunged from a folder. */
  z.object({
    type: z.literal('vanished'),
    path: z.string(),
    uidvalidity: z.number().int().nonnegative(),
    uids: z.array(z.number().int().positive()),
  }),
  /**
   * Every UID the folder holds now from `from_uid` up to `up_to` (used to find expunges when QRESYNC
   * is not available): known UIDs in that range not listed here vanished. A large folder's snapshot
   * comes in pieces (`MAX_CHANGE_UIDS`), each with its own range. Without a range: from 1 up to the
   * Worker's cursor.
   */
  z.object({
    type: z.literal('snapshot'),
    path: z.string(),
    uidvalidity: z.number().int().nonnegative(),
    uids: z.array(z.number().int().positive()),
    from_uid: z.number().int().positive().optional(),
    up_to: z.number().int().nonnegative().optional(),
  }),
  /** Progress: everything up to `last_uid` and `highest_modseq` has been reported for this folder. */
  z.object({
    type: z.literal('cursor'),
    path: z.string(),
    uidvalidity: z.number().int().nonnegative(),
    last_uid: z.number().int().nonnegative(),
    highest_modseq: z.string().nullable(),
  }),
  /**
   * Evidence for emails left in no folder (see `OrphanState`): each of `folders` was read through
   * (everything it held relayed, nothing held back or skipped) by a pass that began when the latest
   * mark the gateway had been told was `started`. `listed`: the mark when the gateway's latest folder
   * listing began (a folder created since an email left is known before its absence counts).
   */
  z.object({
    type: z.literal('passed'),
    listed: z.number().int().nonnegative(),
    folders: z.array(
      z.object({
        path: z.string(),
        uidvalidity: z.number().int().nonnegative(),
        started: z.number().int().nonnegative(),
      }),
    ),
  }),
  /**
   * A folder that cannot make progress (the server refuses to open it), or `problem: null` when it
   * can again: the account's `last_error` names the folder and the reason while the rest syncs on.
   */
  z.object({
    type: z.literal('folder_problem'),
    path: z.string(),
    problem: z.string().max(500).nullable(),
  }),
  /** Progress of the initial sync: `running` when a pull starts (again), then `completed` or `failed` once. */
  z.object({
    type: z.literal('initial_sync'),
    state: z.enum(['running', 'completed', 'failed']),
    /** For `failed`: a short, credential-free reason. */
    error: z.string().max(1000).nullable(),
  }),
]);
export type Change = z.infer<typeof Change>;

/** Where the account's sync stands for one folder (kept by the account's Durable Object). */
export const FolderCursor = z.object({
  path: z.string(),
  uidvalidity: z.number().int().nonnegative(),
  /** Every UID up to here has been reported (or was in the folder before the account connected). */
  last_uid: z.number().int().nonnegative(),
  highest_modseq: z.string().nullable(),
  /**
   * The folder is being read again after a UIDVALIDITY change: the Worker waits for a `cursor`
   * change to end it, so the gateway passes over the folder and sends one even when nothing moved.
   */
  resync: z.boolean().optional(),
});
export type FolderCursor = z.infer<typeof FolderCursor>;
