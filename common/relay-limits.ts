/**
 * The relay protocol's constants (see relay.ts): sizes and error types both sides agree on. Kept
 * apart from relay.ts's zod schemas so that the gateway can use them without loading zod.
 */

/** Sources larger than this many bytes are staged (see `MessageIn.staged`). */
export const STAGE_SOURCE_BYTES = 2 * 1024 * 1024;
/**
 * Staged sources larger than this go in parts of this size (an R2 multipart upload): no call to
 * the Worker carries more, and the Worker never holds a whole large source.
 */
export const STAGE_PART_BYTES = 16 * 1024 * 1024;
/** The gateway's default limit on a message (`GATEWAY_MAX_MESSAGE_BYTES`): the largest any common provider accepts. */
export const DEFAULT_MAX_MESSAGE_BYTES = 150 * 1024 * 1024;

/** Keep a change batch under this many bytes of JSON (raw sources included); a bigger message goes alone. */
export const MAX_BATCH_BYTES = 8 * 1024 * 1024;
/** Batches of one account on their way to the Worker at once (see `ChangesSequence`). */
export const BATCHES_IN_FLIGHT = 2;
/** At most this many messages per batch (the Worker writes a change set-based: a few D1 statements and one R2 object). */
export const MAX_BATCH_MESSAGES = 500;
/**
 * At most this many UIDs in one `flags`, `vanished` or `snapshot` change, and such a piece travels
 * in a batch of its own: whatever the folder's size, the Worker reads and writes one piece in a few
 * statements within one invocation's limits, each binding one JSON value far below D1's 2 MB.
 */
export const MAX_CHANGE_UIDS = 2_000;

/** Error answers of the internal endpoints (same shape as the public API's errors). */
export const LEASE_LOST_TYPE = 'errors/lease_lost';
export const OUT_OF_ORDER_TYPE = 'errors/out_of_order';
/** Another live process uses this gateway id (409). */
export const GATEWAY_ID_IN_USE_TYPE = 'errors/gateway_id_in_use';
