/** Bindings and secrets of the Worker (see wrangler.toml). */
export interface Env {
  /** The directory and the first mail shard; MAIL_DB_2, MAIL_DB_3, … are more shards (shards/registry.ts). */
  DB: D1Database;
  /**
   * Only in an account's view of env (shards/registry.ts `bindAccountShard`): DB is then the
   * account's shard, DIRECTORY the real DB and SHARD_NAME the shard's binding name.
   */
  DIRECTORY?: D1Database;
  SHARD_NAME?: string;
  BLOBS: R2Bucket;
  /** One AccountObject per account; its typed stub: durable/account-stub.ts. */
  ACCOUNTS: DurableObjectNamespace;
  /** One GatewayObject per gateway process; its typed stub: durable/gateway-stub.ts. */
  GATEWAYS: DurableObjectNamespace;
  WEBHOOKS: Queue<WebhookQueueMessage>;
  /** Rate limits (wrangler.toml `[[ratelimits]]`, docs/security.md); an absent one does not limit. */
  /** Requests per API key. */
  API_RATE_LIMIT?: RateLimit;
  /** Requests of all API keys together. */
  WORKSPACE_RATE_LIMIT?: RateLimit;
  /** Requests without a valid key, per client address, before any lookup. */
  ADDRESS_RATE_LIMIT?: RateLimit;
  /** API keys created, all together. */
  KEY_CREATION_RATE_LIMIT?: RateLimit;
  /** Tracking hits per client address. */
  TRACKING_RATE_LIMIT?: RateLimit;
  /** One hit per client address and tracking link that reaches D1 (limit 1). */
  TRACKING_REPEAT_LIMIT?: RateLimit;
  /** POST /mail-view per client address. */
  MAIL_VIEW_RATE_LIMIT?: RateLimit;
  /** Live API keys at most (default 100). */
  MAX_API_KEYS?: string;
  /** Accepted as an API key; how the first key is made. */
  ADMIN_API_KEY?: string;
  /** base64 of 32 random bytes: AES-256-GCM key for secrets at rest. */
  CREDENTIALS_KEY: string;
  /** The CREDENTIALS_KEY before a rotation: still opens what it sealed, which is then sealed again (docs/security.md). */
  CREDENTIALS_KEY_PREVIOUS?: string;
  /** Shared secret that signs every call between the gateway and the Worker. */
  GATEWAY_SECRET: string;
  /** "true" allows webhook URLs on private/loopback addresses (local development). */
  ALLOW_PRIVATE_WEBHOOK_URLS?: string;
  /** "true" allows auth intents with private/loopback/link-local IMAP/SMTP hosts (local development). */
  ALLOW_PRIVATE_MAIL_HOSTS?: string;
  /** "true" allows IMAP/SMTP encryption NONE (passwords in clear; local development). */
  ALLOW_PLAINTEXT_MAIL?: string;
  /** Seconds a send waits for the gateway's answer before its outcome counts as unknown (default 90). */
  SEND_TIMEOUT_SECONDS?: string;
  /** Sends one account may have accepted and not yet finished; more answer 429 (1–1000, default 16). */
  SEND_QUEUE_LIMIT?: string;
  /** Seconds after which a claimed Idempotency-Key whose message never reached the account's object may be taken over (default 600). */
  IDEMPOTENCY_ABANDONED_SECONDS?: string;
  /** Seconds a gateway's lease on an account lasts without a heartbeat (5–3600, default 60). */
  GATEWAY_LEASE_TTL_SECONDS?: string;
  /** "true": count D1 statements, rows written and invocations, and log the totals (benchmarks only: worker/lib/d1-meter.ts). */
  D1_METER?: string;
  /** Public origin of the Worker for tracking links (e.g. https://mail.example.com); default: the request's origin. */
  PUBLIC_URL?: string;
}

/** The Hono environment of every route: the bindings, and what the auth middleware sets. */
export interface AppEnv {
  Bindings: Env;
  Variables: { apiKeyId: string };
}

/**
 * What travels through the webhooks queue: one outbox event to fan out, or one call to make.
 * `shard`: the binding of the database holding the event and its calls (absent: DB).
 */
export type WebhookQueueMessage =
  | { kind: 'event'; event_id: string; shard?: string }
  | { kind: 'delivery'; conversation_id: string; shard?: string };
