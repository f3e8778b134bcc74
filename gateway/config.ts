import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { DEFAULT_MAX_MESSAGE_BYTES } from '../common/relay-limits.ts';
import { CONNECTION_ENV, DEFAULT_CONNECTIONS, type ConnectionSettings } from './connection-settings.ts';
import type { LogFormat, LogLevel } from './log.ts';

/** Tuning of the per-account sync; every value has an environment variable (see `loadConfig`). */
export interface SyncSettings extends ConnectionSettings {
  /** Reconnect backoff after a dropped or unreachable server. */
  reconnectMinMs: number;
  reconnectMaxMs: number;
  /** Delay before trying again after the server refused the credentials. */
  authRetryMs: number;
  /** Connection/greeting timeout for IMAP and SMTP. */
  connectTimeoutMs: number;
  /**
   * Servers without MOVE: new mail found in a folder is relayed only after this long and a look at
   * the other folders, so that another client's move (COPY, then EXPUNGE) is one move (folder-pass.ts).
   */
  moveSettleMs: number;
  /** Messages larger than this are listed from their headers, without their body; also every IMAP connection's literal limit. */
  maxMessageBytes: number;
  /** Use these IMAP extensions when the server has them (off: for servers with broken ones). */
  qresync: boolean;
  condstore: boolean;
}

export interface GatewayConfig {
  workerUrl: URL;
  secret: string;
  gatewayId: string;
  /** The most accounts this gateway takes (GATEWAY_CAPACITY). */
  capacity: number;
  logLevel: LogLevel;
  /** One JSON object a line (the default when stderr is not a terminal), or text for a person. */
  logFormat: LogFormat;
  /** GET /healthz and /metrics on this port (GATEWAY_HTTP_PORT; null: off) and address. */
  http: { port: number; host: string } | null;
  sync: SyncSettings;
}

export const DEFAULT_SYNC: SyncSettings = {
  ...DEFAULT_CONNECTIONS,
  reconnectMinMs: 1_000,
  reconnectMaxMs: 60_000,
  authRetryMs: 5 * 60_000,
  connectTimeoutMs: 15_000,
  moveSettleMs: 2_000,
  maxMessageBytes: DEFAULT_MAX_MESSAGE_BYTES,
  qresync: true,
  condstore: true,
};

/** Accounts one gateway takes unless GATEWAY_CAPACITY says otherwise. */
export const DEFAULT_CAPACITY = 1000;

export class ConfigError extends Error {}

type NumericSetting = { [K in keyof SyncSettings]: SyncSettings[K] extends number ? K : never }[keyof SyncSettings];

const TUNING: Record<NumericSetting, string> = {
  ...CONNECTION_ENV,
  reconnectMinMs: 'GATEWAY_RECONNECT_MIN_MS',
  reconnectMaxMs: 'GATEWAY_RECONNECT_MAX_MS',
  authRetryMs: 'GATEWAY_AUTH_RETRY_MS',
  connectTimeoutMs: 'GATEWAY_CONNECT_TIMEOUT_MS',
  moveSettleMs: 'GATEWAY_MOVE_SETTLE_MS',
  maxMessageBytes: 'GATEWAY_MAX_MESSAGE_BYTES',
};

export function loadConfig(env: NodeJS.ProcessEnv): GatewayConfig {
  const missing = ['WORKER_URL', 'GATEWAY_SECRET'].filter((k) => !env[k]);
  if (missing.length) throw new ConfigError(`missing required environment: ${missing.join(', ')}`);
  let workerUrl: URL;
  try {
    workerUrl = new URL(env.WORKER_URL!);
  } catch {
    throw new ConfigError('WORKER_URL is not a URL (e.g. http://127.0.0.1:8787)');
  }
  if (workerUrl.protocol !== 'http:' && workerUrl.protocol !== 'https:')
    throw new ConfigError('WORKER_URL must be http:// or https://');
  // Lease answers carry mailbox passwords: plain http only to this machine.
  if (workerUrl.protocol === 'http:' && !isLoopbackName(workerUrl.hostname))
    throw new ConfigError('WORKER_URL must be https:// unless it is a loopback address (http://127.0.0.1:8787)');
  // One id per process by default, so that two processes on a host never share one. An operator who
  // sets GATEWAY_ID gets the same id after a restart: the gateway takes its own accounts back first.
  const gatewayId = env.GATEWAY_ID || `${hostname().slice(0, 60)}-${process.pid}-${randomBytes(3).toString('hex')}`;
  if (gatewayId.length > 100) throw new ConfigError('GATEWAY_ID is longer than 100 characters');
  const capacity = env.GATEWAY_CAPACITY ? Number(env.GATEWAY_CAPACITY) : DEFAULT_CAPACITY;
  if (!Number.isInteger(capacity) || capacity < 1) throw new ConfigError('GATEWAY_CAPACITY must be a positive integer');

  const sync = { ...DEFAULT_SYNC };
  for (const [key, name] of Object.entries(TUNING) as [NumericSetting, string][]) {
    const raw = env[name];
    if (raw === undefined || raw === '') continue;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < 0) throw new ConfigError(`${name} must be a non-negative integer`);
    sync[key] = value;
  }
  for (const [key, name] of [
    ['qresync', 'GATEWAY_IMAP_QRESYNC'],
    ['condstore', 'GATEWAY_IMAP_CONDSTORE'],
  ] as const) {
    const raw = env[name];
    if (raw === undefined || raw === '') continue;
    if (!['0', '1', 'true', 'false'].includes(raw)) throw new ConfigError(`${name} must be 0 or 1`);
    sync[key] = raw === '1' || raw === 'true';
  }
  const logLevel = (env.GATEWAY_LOG_LEVEL || 'info') as LogLevel;
  if (!['debug', 'info', 'warn', 'error'].includes(logLevel))
    throw new ConfigError('GATEWAY_LOG_LEVEL must be debug, info, warn or error');
  const logFormat = (env.GATEWAY_LOG_FORMAT || (process.stderr.isTTY ? 'text' : 'json')) as LogFormat;
  if (!['json', 'text'].includes(logFormat)) throw new ConfigError('GATEWAY_LOG_FORMAT must be json or text');
  return {
    workerUrl,
    secret: env.GATEWAY_SECRET!,
    gatewayId,
    capacity,
    logLevel,
    logFormat,
    http: httpSettings(env),
    sync,
  };
}

function httpSettings(env: NodeJS.ProcessEnv): GatewayConfig['http'] {
  if (!env.GATEWAY_HTTP_PORT) return null;
  const port = Number(env.GATEWAY_HTTP_PORT);
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw new ConfigError('GATEWAY_HTTP_PORT must be a port number (1-65535)');
  return { port, host: env.GATEWAY_HTTP_HOST || '127.0.0.1' };
}

/** localhost, 127.0.0.0/8 or [::1] as a URL's hostname. */
function isLoopbackName(hostname: string): boolean {
  return (
    hostname === 'localhost' ||
    hostname.endsWith('.localhost') ||
    hostname === '[::1]' ||
    /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname)
  );
}
