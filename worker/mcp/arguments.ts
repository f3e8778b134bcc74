/**
 * A tool's arguments are the inputs of one REST operation, as the OpenAPI document describes them
 * (generated from the zod schemas the route validates with): its path and query parameters, the
 * Idempotency-Key header as `idempotency_key`, and the fields of its JSON body, side by side in one
 * object. The tool's input schema is that description, and a call becomes that REST request, so the
 * route's own validation judges the arguments and its refusal is the tool's, word for word.
 */
import { invalid } from '../lib/errors.ts';
import { fullPath, operationObject } from '../openapi/document.ts';
import { OPERATIONS } from '../openapi/operations.ts';

type Json = Record<string, any>;
type Place = 'path' | 'query' | 'header' | 'body';

/** JSON Schema of an object, as MCP's `inputSchema` wants it. */
export interface ObjectSchema {
  [key: string]: unknown;
  type: 'object';
  properties: Record<string, Json>;
  required: string[];
  additionalProperties: false;
}

export interface OperationInput {
  method: string;
  /** The path as served, with `{name}` placeholders. */
  path: string;
  /** Where each argument goes, and under which name there. */
  places: Map<string, { place: Place; name: string }>;
  schema: ObjectSchema;
}

/** `Idempotency-Key` as an argument name. */
const argumentName = (header: string) => header.toLowerCase().replaceAll('-', '_');

/** The inputs of the operation `operationId`, as arguments. */
export function operationInput(operationId: string): OperationInput {
  const op = OPERATIONS.find((o) => o.operationId === operationId);
  if (!op) throw new Error(`no operation ${operationId}`);
  // The operation as the OpenAPI document describes it (built alone: the whole document is not needed).
  const requestSchemas: Record<string, Json> = {};
  const described = operationObject(op, requestSchemas) as Json;
  const places = new Map<string, { place: Place; name: string }>();
  const schema: ObjectSchema = { type: 'object', properties: {}, required: [], additionalProperties: false };
  const add = (arg: string, place: Place, name: string, property: Json, required: boolean) => {
    if (places.has(arg)) throw new Error(`${operationId}: two inputs are called ${arg}`);
    places.set(arg, { place, name });
    schema.properties[arg] = property;
    if (required) schema.required.push(arg);
  };
  for (const p of (described.parameters ?? []) as Json[]) {
    const arg = p.in === 'header' ? argumentName(p.name) : p.name;
    add(arg, p.in, p.name, { ...p.schema, description: p.description }, p.required === true);
  }
  const bodyRef: string | undefined = described.requestBody?.content['application/json'].schema.$ref;
  if (bodyRef) {
    const body: Json = requestSchemas[bodyRef.split('/').pop()!]!;
    const required = new Set<string>(body.required ?? []);
    for (const [name, property] of Object.entries(body.properties as Json))
      add(name, 'body', name, property, required.has(name));
  }
  return { method: op.method.toUpperCase(), path: fullPath(op), places, schema };
}

/** A query value as a query string carries it: numbers and booleans in their JSON spelling. */
function queryValues(name: string, value: unknown): string[] {
  if (Array.isArray(value)) return value.flatMap((v) => queryValues(name, v));
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') return [String(value)];
  throw invalid(`${name}: must be a string, a number or true/false`);
}

/**
 * The REST request for these arguments (already stripped of the tool's own). Arguments no input
 * has go into the body, which refuses them as it refuses unknown fields; an operation without a
 * body refuses them here, in the same words. Everything else is the route's to judge.
 */
export function restRequest(input: OperationInput, args: Record<string, unknown>, origin: string, key: string) {
  const hasBody = [...input.places.values()].some((p) => p.place === 'body');
  const unknown = Object.keys(args).filter((name) => !input.places.has(name));
  if (unknown.length && !hasBody)
    throw invalid(`arguments: unknown field${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}`);
  const url = new URL(origin);
  const headers = new Headers({ 'X-API-KEY': key });
  const body: Record<string, unknown> = Object.fromEntries(unknown.map((name) => [name, args[name]]));
  let path = input.path;
  for (const [arg, { place, name }] of input.places) {
    const value = args[arg];
    if (place === 'path' && typeof value !== 'string') throw invalid(`${arg}: is required (a string)`);
    if (value === undefined || (value === null && place !== 'body')) continue;
    if (place === 'body') body[name] = value;
    else if (place === 'query') for (const v of queryValues(arg, value)) url.searchParams.append(name, v);
    else if (place === 'path') path = path.replace(`{${name}}`, encodeURIComponent(value as string));
    else if (typeof value === 'string') headers.set(name, value);
    else throw invalid(`${arg}: must be a string`);
  }
  url.pathname = path;
  if (hasBody) headers.set('Content-Type', 'application/json');
  return new Request(url, { method: input.method, headers, body: hasBody ? JSON.stringify(body) : undefined });
}
