/**
 * Request validation: every query, path and body goes through a zod schema first, and any failure
 * becomes a 400 in the spec's shape whose `detail` names the parameter and what is wrong with it.
 */
import { z } from 'zod';
import type { Context } from 'hono';
import { ApiError } from './errors.ts';

export function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((issue) => {
      const where = issue.path.length ? issue.path.map(String).join('.') : 'body';
      // Every body refuses fields it does not know, and says which.
      if (issue.code === 'unrecognized_keys')
        return `${where}: unknown field${issue.keys.length > 1 ? 's' : ''} ${issue.keys.join(', ')}`;
      return `${where}: ${issue.message}`;
    })
    .join('; ');
}

export function parseOrThrow<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const result = schema.safeParse(input);
  if (!result.success) throw new ApiError('invalid_parameters', describeIssues(result.error));
  return result.data;
}

/** Query parameters (single values) validated against `schema`. */
export function parseQuery<S extends z.ZodType>(c: Context, schema: S): z.output<S> {
  return parseOrThrow(schema, c.req.query());
}

/** The JSON body validated against `schema`; malformed JSON is a 400 that says so. */
export async function parseJsonBody<S extends z.ZodType>(c: Context, schema: S): Promise<z.output<S>> {
  const text = await c.req.text();
  let value: unknown = {};
  if (text.trim() !== '') {
    try {
      value = JSON.parse(text);
    } catch (err) {
      throw new ApiError('invalid_parameters', `body: malformed JSON (${(err as Error).message})`);
    }
  }
  return parseOrThrow(schema, value);
}

/** An integer carried in a query string, within [min, max]. */
export function intParam(min: number, max = Number.MAX_SAFE_INTEGER) {
  const range = max === Number.MAX_SAFE_INTEGER ? `at least ${min}` : `from ${min} to ${max}`;
  return z
    .string()
    .regex(/^-?\d+$/, `must be an integer ${range}`)
    .transform(Number)
    .pipe(z.number().int().min(min, `must be an integer ${range}`).max(max, `must be an integer ${range}`))
    .meta({ type: 'integer', minimum: min, ...(max === Number.MAX_SAFE_INTEGER ? {} : { maximum: max }) });
}

/**
 * A value from a fixed set, accepted in any case and turned into its canonical spelling. The
 * document lists the canonical values (what a client should send; other cases are tolerated).
 */
export function anyCase<const T extends string>(
  values: readonly T[],
  error: string | ((input: string) => string) = `must be one of ${values.join(', ')}`,
) {
  const canonical = new Map(values.map((v) => [v.toLowerCase(), v]));
  const message = (input: string) => (typeof error === 'string' ? error : error(input));
  return z
    .string({ error: (issue) => message(String(issue.input)) })
    .transform((input, ctx): T => {
      const found = canonical.get(input.toLowerCase());
      if (found !== undefined) return found;
      ctx.addIssue({ code: 'custom', message: message(input), input });
      return z.NEVER;
    })
    .meta({ enum: [...values] });
}

/** A boolean carried in a query string: `true` or `false` (any case). */
export const boolParam = anyCase(['true', 'false'], 'must be true or false').transform((v) => v === 'true');

/** An ISO 8601 timestamp in a query string, as epoch milliseconds. */
export const instantParam = z
  .string()
  .refine((v) => /^\d{4}-\d{2}-\d{2}/.test(v) && !Number.isNaN(Date.parse(v)), 'must be an ISO 8601 timestamp')
  .transform((v) => Date.parse(v))
  .meta({ format: 'date-time' });

/** Strings that end up in mail headers or logs: no CR, LF or NUL. */
export const singleLine = (label = 'value') =>
  z.string().refine((v) => !/[\r\n\0]/.test(v), `${label} must not contain CR, LF or NUL characters`);
