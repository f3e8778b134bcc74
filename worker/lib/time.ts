/** Timestamps as the API shows them: ISO 8601, UTC, millisecond precision. */
export const isoNow = (): string => new Date().toISOString();
export const iso = (ms: number): string => new Date(ms).toISOString();
