/**
 * How many connections an account holds and what polling costs (README "Configuration"). By default
 * an idle account holds 2 IMAP connections: one IDLE on INBOX (All Mail on Gmail) and one command
 * connection that polls the other folders, runs their passes, the initial sync and the mailbox
 * commands in turn. SMTP connections exist only around sends.
 */
export interface ConnectionSettings {
  /** Poll of the folder list and of the folders without an IDLE connection: a change there waits at most this long. */
  pollIntervalMs: number;
  /** IDLE connections per account besides the first (special-use folders, in README order); 0 by default. */
  maxExtraIdle: number;
  /** Without CONDSTORE, flags are re-read every poll in pages of this many messages (one FETCH each). */
  flagScanPage: number;
  /** An SMTP connection is closed after this long without a send. */
  smtpIdleMs: number;
}

export const DEFAULT_CONNECTIONS: ConnectionSettings = {
  pollIntervalMs: 15_000,
  maxExtraIdle: 0,
  flagScanPage: 1_000,
  smtpIdleMs: 30_000,
};

/** The environment variable of each setting (gateway/config.ts reads them with the other tuning). */
export const CONNECTION_ENV: Record<keyof ConnectionSettings, string> = {
  pollIntervalMs: 'GATEWAY_POLL_INTERVAL_MS',
  maxExtraIdle: 'GATEWAY_MAX_EXTRA_IDLE',
  flagScanPage: 'GATEWAY_FLAG_SCAN_PAGE',
  smtpIdleMs: 'GATEWAY_SMTP_IDLE_MS',
};
