/**
 * One short JSON line per event on stderr. Callers pass identifiers and counts only: never
 * passwords, never message contents (the helpers below keep error details to a code and a
 * trimmed message).
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type LogFields = Record<string, string | number | boolean | null | undefined>;

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

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
): Logger {
  const emit = (at: LogLevel, msg: string, fields?: LogFields) => {
    if (ORDER[at] < ORDER[level]) return;
    write(JSON.stringify({ t: new Date().toISOString(), level: at, msg, ...base, ...fields }));
  };
  return {
    debug: (m, f) => emit('debug', m, f),
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
    child: (fields) => createLogger(level, { ...base, ...fields }, write),
  };
}

/** A short, credential-free description of an error for logs. */
export function errorFields(err: unknown): LogFields {
  if (!(err instanceof Error)) return { err: String(err).slice(0, 200) };
  const code = (err as { code?: unknown }).code;
  return { err: err.message.slice(0, 200), code: typeof code === 'string' ? code : undefined };
}
