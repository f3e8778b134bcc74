/**
 * The gateway's log: one line per event on stderr. As JSON (GATEWAY_LOG_FORMAT=json, the default
 * when stderr is not a terminal) each line is one object: `time`, `level`, `msg`, the `gateway` id,
 * the `account` id when the event is an account's, then the event's own fields. As text (a terminal)
 * the same, for a person to read.
 *
 * Callers pass identifiers and counts only: never passwords, tokens or message contents (the
 * helpers below keep error details to a code and a trimmed message). As a second line of defence a
 * field whose name says it holds a secret or a body is written as "[redacted]".
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type LogFormat = 'json' | 'text';
export type LogFields = Record<string, string | number | boolean | null | undefined>;

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };
const SECRET_FIELD = /pass|secret|token|authorization|cookie|credential|body|source|content/i;

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  child(fields: LogFields): Logger;
}

export function createLogger(
  level: LogLevel = 'info',
  base: LogFields = {},
  write: (line: string) => void = (l) => process.stderr.write(l + '\n'),
  format: LogFormat = 'json',
): Logger {
  const emit = (at: LogLevel, msg: string, fields?: LogFields) => {
    if (ORDER[at] < ORDER[level]) return;
    const entry: LogFields = { time: new Date().toISOString(), level: at, msg };
    for (const [key, value] of Object.entries({ ...base, ...fields }))
      if (value !== undefined) entry[key] = SECRET_FIELD.test(key) ? '[redacted]' : value;
    write(format === 'json' ? JSON.stringify(entry) : asText(entry));
  };
  return {
    debug: (m, f) => emit('debug', m, f),
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
    child: (fields) => createLogger(level, { ...base, ...fields }, write, format),
  };
}

/** `2026-01-02T03:04:05.678Z INFO  lease granted gateway=gw-1 account=acc_… cursors=3` */
function asText({ time, level, msg, ...fields }: LogFields): string {
  const rest = Object.entries(fields).map(
    ([k, v]) => `${k}=${typeof v === 'string' && /\s/.test(v) ? JSON.stringify(v) : v}`,
  );
  return [time, String(level).toUpperCase().padEnd(5), msg, ...rest].join(' ');
}

/** A short, credential-free description of an error for logs. */
export function errorFields(err: unknown): LogFields {
  if (!(err instanceof Error)) return { err: String(err).slice(0, 200) };
  const code = (err as { code?: unknown }).code;
  return { err: err.message.slice(0, 200), code: typeof code === 'string' ? code : undefined };
}
