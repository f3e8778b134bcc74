/**
 * Rate limits that run before storage. Each is a Workers Rate Limiting binding (wrangler.toml
 * `[[ratelimits]]`): a counter kept by Cloudflare per location, outside the isolate, that costs no
 * D1 query and no Durable Object call. The client's address is CF-Connecting-IP, which Cloudflare
 * sets on every request (and `wrangler dev` sets from the socket). Every refusal is 429
 * errors/rate_limited with Retry-After. docs/security.md lists the limits and their settings.
 */
import type { Context, MiddlewareHandler } from 'hono';
import type { AppEnv, Env } from '../env.ts';
import { ApiError } from './errors.ts';

/** The window of every limit here (the bindings' `period`): the longest a limited client waits. */
export const RATE_LIMIT_PERIOD_SECONDS = 60;

/** The client's address; requests that carry none (only possible off Cloudflare) share one counter. */
export function clientAddress(c: Context<AppEnv>): string {
  return c.req.header('CF-Connecting-IP')?.trim() || 'unknown';
}

export function rateLimited(detail: string): ApiError {
  return new ApiError('rate_limited', `${detail} Retry after the time in Retry-After.`, {
    'Retry-After': String(RATE_LIMIT_PERIOD_SECONDS),
  });
}

/** Whether `key` is still within `limiter`'s budget (counting this call); no limiter means yes. */
export async function withinLimit(limiter: RateLimit | undefined, key: string): Promise<boolean> {
  return !limiter || (await limiter.limit({ key })).success;
}

/** Throws the 429 when `key` is over `limiter`'s budget. */
export async function enforceLimit(limiter: RateLimit | undefined, key: string, detail: string): Promise<void> {
  if (!(await withinLimit(limiter, key))) throw rateLimited(detail);
}

/** Middleware: at most the binding's budget of requests per client address, before anything else runs. */
export function limitPerAddress(
  binding: (env: Env) => RateLimit | undefined,
  detail: string,
): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    await enforceLimit(binding(c.env), clientAddress(c), detail);
    await next();
  };
}
