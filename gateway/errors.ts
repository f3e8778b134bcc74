import type { GatewayErrorKind } from '../common/relay.ts';

/** An error with a kind the Worker maps onto the public API (see GatewayErrorKind in common/relay.ts). */
export class GatewayError extends Error {
  readonly kind: GatewayErrorKind;
  /** A send failed at a point where the server may have taken the message anyway (the link broke mid-transaction). */
  mayHaveSent = false;
  /** What exactly went wrong, for the gateway's log only (the message is the same for every unreachable server). */
  reason?: string;
  constructor(kind: GatewayErrorKind, detail: string) {
    super(detail);
    this.kind = kind;
  }
}

/** A call to the Worker that failed: refused (4xx), or out of reach after its retries. */
export class WorkerFailure extends Error {}

type Service = 'IMAP' | 'SMTP';

const NETWORK: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host name lookup failed',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ECONNRESET: 'connection reset by the server',
  EPIPE: 'connection closed by the server',
  ETIMEDOUT: 'timed out',
  ETIMEOUT: 'timed out',
  CONNECT_TIMEOUT: 'timed out connecting',
  GREETING_TIMEOUT: 'timed out waiting for the greeting',
  UPGRADE_TIMEOUT: 'timed out during STARTTLS',
  EConnectionClosed: 'connection closed by the server',
  NoConnection: 'connection closed by the server',
  ClosedAfterConnectTLS: 'connection closed by the server',
  ClosedAfterConnectText: 'connection closed by the server',
};

/** Collects the codes of an error and its causes (nodemailer and imapflow wrap socket errors). */
function codesOf(err: unknown): string[] {
  const codes: string[] = [];
  for (let e: unknown = err, depth = 0; e && typeof e === 'object' && depth < 4; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') codes.push(code);
    const message = (e as { message?: unknown }).message;
    if (typeof message === 'string') codes.push(...(message.match(/\b(E[A-Z_]{3,}|ERR_[A-Z_]+)\b/g) ?? []));
    e = (e as { cause?: unknown; _err?: unknown }).cause ?? (e as { _err?: unknown })._err;
  }
  return codes;
}

function isTlsError(err: unknown, codes: string[]): boolean {
  if ((err as { tlsFailed?: unknown })?.tlsFailed) return true;
  if (codes.some((c) => /^ERR_(TLS|SSL)|CERT|^DEPTH_ZERO|^UNABLE_TO_|^ETLS$/.test(c))) return true;
  const message = err instanceof Error ? err.message : '';
  return /certificate|self[- ]signed|SSL routines|wrong version number|TLS/i.test(message);
}

export function isAuthFailure(err: unknown): boolean {
  const e = err as { authenticationFailed?: unknown; code?: unknown; serverResponseCode?: unknown } | null;
  return (
    !!e && (e.authenticationFailed === true || e.code === 'EAUTH' || e.serverResponseCode === 'AUTHENTICATIONFAILED')
  );
}

/** What went wrong reaching a server, in words (for the log). */
function unreachableReason(err: unknown): string {
  if ((err as { code?: unknown })?.code === 'EMAILHOSTREFUSED') return 'refused: a private address';
  const codes = codesOf(err);
  if (isTlsError(err, codes)) {
    const code = codes.find((c) => /CERT|^ERR_|^DEPTH|^UNABLE/.test(c));
    return `TLS handshake failed${code ? ` (${code})` : ''}`;
  }
  for (const code of codes) {
    const what = NETWORK[code];
    if (what) return what;
  }
  return codes[0] ?? 'unexpected server response';
}

/**
 * Maps a connection/login failure to the error the API reports; it never contains the user's
 * password (server texts are not echoed). Every server that cannot be reached (refused by the host
 * rule, closed port, filtered, TLS failure, DNS) gets the same message, so that neither an account's
 * last_error nor an API error tells what answers at an address; `reason` keeps it for the log.
 */
export function classifyError(err: unknown, service: Service, host: string, port: number): GatewayError {
  if (err instanceof GatewayError) return err;
  if (isAuthFailure(err))
    return new GatewayError(
      'invalid_credentials',
      `${service} login failed: the server refused the user name or password`,
    );
  const error = new GatewayError('provider_error', `${service} ${host}:${port}: the server could not be reached`);
  error.reason = unreachableReason(err);
  return error;
}

export type FailureClass = 'auth' | 'network' | 'tls' | 'protocol' | 'worker';

/** The class of a failure, for the metrics: which side broke, never who. */
export function failureClass(err: unknown): FailureClass {
  if (err instanceof WorkerFailure) return 'worker';
  if (isAuthFailure(err) || (err instanceof GatewayError && err.kind === 'invalid_credentials')) return 'auth';
  const codes = codesOf(err);
  if (isTlsError(err, codes)) return 'tls';
  if (codes.some((code) => code in NETWORK)) return 'network';
  return 'protocol';
}
