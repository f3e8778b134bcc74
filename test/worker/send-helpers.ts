/** Helpers of the send tests. */
import { api } from './helpers.ts';

/** POST /emails with a JSON body and optional headers (an Idempotency-Key, say). */
export const send = (body: unknown, headers: Record<string, string> = {}) => api('POST', '/emails', { body, headers });
