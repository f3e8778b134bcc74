/**
 * Run-time checks of what the Worker sends the gateway (answers to its calls, control-socket
 * requests), from JSON Schemas generated out of common/relay.ts's zod schemas (`npm run
 * relay-schemas`): the protocol keeps one definition, and the gateway does not load zod.
 */
import type { z } from 'zod';
import type * as relay from '../common/relay.ts';
import { compileSchema, type JsonSchema } from './json-schema.ts';
import schemas from './relay-schemas.json' with { type: 'json' };

export type RelayCheckedName = keyof typeof schemas & keyof typeof relay;
export type RelayChecked<K extends RelayCheckedName> = (typeof relay)[K] extends z.ZodType
  ? z.infer<(typeof relay)[K]>
  : never;

/** Answers the value, typed, when it fits the named schema; throws naming what does not fit. */
export function relayCheck<K extends RelayCheckedName>(name: K): (value: unknown) => RelayChecked<K> {
  const check = compileSchema(schemas[name] as JsonSchema, name);
  return (value) => {
    const problem = check(value);
    if (problem) throw new Error(`not a valid ${name}: ${problem}`);
    return value as RelayChecked<K>;
  };
}

/**
 * A JSON body checked against its relay schema. The problem named never quotes the body (a lease
 * answer carries passwords): the parser's own message would, so it is left out.
 */
export function parseChecked<T>(
  text: string,
  check: (value: unknown) => T,
): { ok: true; value: T } | { ok: false; problem: string } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, problem: 'not JSON' };
  }
  try {
    return { ok: true, value: check(value) };
  } catch (err) {
    return { ok: false, problem: err instanceof Error ? err.message : String(err) };
  }
}
