/**
 * The document as a test oracle (client/openapi.json, which test/node/openapi.test.ts keeps equal to
 * what the Worker generates): every answer the end-to-end tests get is checked against the
 * schema the OpenAPI document gives for its method, path and status (ajv, JSON Schema 2020-12). A
 * status the document does not list for the operation, or a body that does not match, throws.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { readFileSync } from 'node:fs';

type Json = Record<string, any>;

interface Route {
  method: string;
  template: string;
  pattern: RegExp;
  literals: number;
  responses: Record<string, Json>;
}

let compiled: { routes: Route[]; validator: (ref: string) => ValidateFunction } | undefined;

function load() {
  if (compiled) return compiled;
  const doc = JSON.parse(readFileSync(new URL('../../client/openapi.json', import.meta.url), 'utf8')) as Json;
  // strict off: the schemas carry OpenAPI's `example` and zod's annotations, which ajv need not know.
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats.default(ajv);
  const base = 'https://mailbox-edge.test/openapi.json';
  ajv.addSchema({ $id: base, components: doc.components });
  const cache = new Map<string, ValidateFunction>();
  const validator = (ref: string) => {
    let fn = cache.get(ref);
    if (!fn) {
      fn = ajv.getSchema(`${base}${ref}`);
      if (!fn) throw new Error(`the document has no schema ${ref}`);
      cache.set(ref, fn);
    }
    return fn;
  };
  const routes: Route[] = [];
  for (const [template, item] of Object.entries(doc.paths as Record<string, Json>)) {
    const segments = template.split('/');
    const pattern = new RegExp(
      `^${segments.map((s) => (/^\{\w+\}$/.test(s) ? '[^/]+' : s.replace(/[.*+?^$()|[\]\\]/g, '\\$&'))).join('/')}$`,
    );
    for (const [method, op] of Object.entries(item))
      routes.push({
        method: method.toUpperCase(),
        template,
        pattern,
        literals: segments.filter((s) => s && !s.startsWith('{')).length,
        responses: op.responses,
      });
  }
  compiled = { routes, validator };
  return compiled;
}

/** The documented operation a request reaches: the match with the most literal segments, as Hono routes. */
function routeOf(method: string, path: string): Route {
  const matches = load().routes.filter((r) => r.method === method && r.pattern.test(path));
  const best = matches.sort((a, b) => b.literals - a.literals)[0];
  if (!best) throw new Error(`contract: ${method} ${path} is not in the OpenAPI document`);
  return best;
}

/** Throws unless `status` and `body` are what the document says `method url` answers. */
export function checkResponse(method: string, url: string, status: number, contentType: string | null, body: unknown) {
  const path = new URL(url, 'http://x').pathname;
  const route = routeOf(method.toUpperCase(), path);
  const response = route.responses[String(status)];
  if (!response)
    throw new Error(`contract: ${method} ${route.template} answered ${status}, which the document does not list`);
  const json = response.content?.['application/json'];
  if (!json?.schema?.$ref) return;
  if (!contentType?.includes('application/json'))
    throw new Error(`contract: ${method} ${route.template} ${status} should be JSON, got ${contentType}`);
  const validate = load().validator(json.schema.$ref);
  if (!validate(body))
    throw new Error(
      `contract: ${method} ${route.template} ${status} does not match ${json.schema.$ref}: ${JSON.stringify(validate.errors?.slice(0, 5))}\nbody: ${JSON.stringify(body).slice(0, 1500)}`,
    );
}

/** Throws unless `payload` is an Event envelope as the document's `webhooks` describe it (for its type). */
export function checkEvent(payload: any): void {
  const name = `#/components/schemas/${String(payload?.type)
    .split(/[._]/)
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join('')}Event`;
  for (const ref of ['#/components/schemas/Event', name]) {
    const validate = load().validator(ref);
    if (!validate(payload))
      throw new Error(
        `contract: the ${payload?.type} call does not match ${ref}: ${JSON.stringify(validate.errors?.slice(0, 5))}`,
      );
  }
}

/** A fetch that checks every answer against the document (for the typed client and ad-hoc calls). */
export function checkedFetch(inner: typeof fetch = fetch): typeof fetch {
  return async (input, init) => {
    const request = new Request(input, init);
    const response = await inner(request);
    const contentType = response.headers.get('content-type');
    // Only JSON bodies are checked (and read twice); bytes (raw sources, attachments) are left alone.
    let body: unknown;
    if (contentType?.includes('application/json')) {
      const text = await response.clone().text();
      try {
        body = JSON.parse(text);
      } catch {
        body = text;
      }
    }
    checkResponse(request.method, request.url, response.status, contentType, body);
    return response;
  };
}
