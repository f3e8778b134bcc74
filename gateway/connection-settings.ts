/**
 * How many connections an account holds and what polling costs (README "Configuration"). By default
 * an account holds at most 2 IMAP connections: one IDLE on INBOX (All Mail on Gmail) that also reads
 * the folder list at each poll, and a command connection, opened when needed and closed after
 * `commandIdleMs` unused, that runs the passes over the other folders, the initial sync and the
 * mailbox commands in turn. SMTP connections exist only around sends.
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
  /**
   * The IMAP command connection is closed after this long without use. Above the poll interval by
   * default: where every poll needs it (servers without CONDSTORE rescan flags) it stays open.
   */
  commandIdleMs: number;
}

export const DEFAULT_CONNECTIONS: ConnectionSettings = {
  pollIntervalMs: 15_000,
  maxExtraIdle: 0,
  flagScanPage: 1_000,
  smtpIdleMs: 30_000,
  commandIdleMs: 30_000,
};

/** The environment variable of each setting (gateway/config.ts reads them with the other tuning). */
export const CONNECTION_ENV: Record<keyof ConnectionSettings, string> = {
  pollIntervalMs: 'GATEWAY_POLL_INTERVAL_MS',
  maxExtraIdle: 'GATEWAY_MAX_EXTRA_IDLE',
  flagScanPage: 'GATEWAY_FLAG_SCAN_PAGE',
  smtpIdleMs: 'GATEWAY_SMTP_IDLE_MS',
  commandIdleMs: 'GATEWAY_COMMAND_IDLE_MS',
};
