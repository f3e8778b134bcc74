/**
 * The OpenAPI 3.1 document, generated from the operations list (operations.ts) and the zod schemas:
 * request schemas are converted as the API reads them (`io: input`), response schemas (registered by
 * id in zod's global registry, worker/schemas/) as the API writes them. Built once per isolate.
 */
import { z } from 'zod';
import { IDEMPOTENCY_HEADER } from '../send/idempotency.ts';
import { ERROR_KINDS } from '../lib/errors.ts';
import { MAX_LIMIT } from '../lib/paging.ts';
import { JSON_FIELDS } from '../send/compose.ts';
import { ErrorBody } from '../schemas/common.ts';
import { EVENT_SCHEMAS } from '../schemas/events.ts';
import { API_DESCRIPTION, PARAMETER_DOCS, PATH_PARAMETER_DOCS } from './descriptions.ts';
import { OPERATIONS, type Operation } from './operations.ts';
import { webhookOperations } from './webhooks.ts';

type Json = Record<string, unknown>;

const ref = (id: string) => ({ $ref: `#/components/schemas/${id}` });

/** A zod schema as JSON Schema, without the per-document keywords an OpenAPI component does not need. */
function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Json {
  const {
    $schema: _schema,
    $id: _id,
    ...rest
  } = z.toJSONSchema(schema, {
    io,
    unrepresentable: 'any',
    // Integers read from a query string are documented as integers, without the string pattern.
    override: ({ jsonSchema: js }) => {
      if (js.type === 'integer') delete js.pattern;
    },
  }) as Json;
  return rest;
}

/** Every response schema registered with an id, referring to each other by `#/components/schemas/…`. */
function responseComponents(): Record<string, Json> {
  // Importing the event schemas registers everything they use; ErrorBody is named explicitly.
  void EVENT_SCHEMAS;
  void ErrorBody;
  const { schemas } = z.toJSONSchema(z.globalRegistry, {
    io: 'output',
    unrepresentable: 'any',
    uri: (id) => `#/components/schemas/${id}`,
  }) as { schemas: Record<string, Json> };
  return Object.fromEntries(Object.entries(schemas).map(([id, { $schema: _schema, $id: _id, ...rest }]) => [id, rest]));
}

function idOfSchema(schema: z.ZodType): string {
  const id = z.globalRegistry.get(schema)?.id;
  if (typeof id !== 'string') throw new Error('a response schema of an operation has no id');
  return id;
}

function queryParameters(query: z.ZodObject): Json[] {
  return Object.entries(query.shape).map(([name, field]) => {
    const { description, ...schema } = jsonSchema(field as z.ZodType, 'input');
    return {
      name,
      in: 'query',
      required: !(field as z.ZodType).safeParse(undefined).success,
      description: (description as string | undefined) ?? PARAMETER_DOCS[name] ?? name,
      schema,
      // Arrays (`type` of the events feed) repeat the parameter: type=a&type=b.
      ...(schema.type === 'array' ? { style: 'form', explode: true } : {}),
    };
  });
}

function pathParameters(path: string): Json[] {
  return [...path.matchAll(/\{(\w+)\}/g)].map(([, name]) => ({
    name,
    in: 'path',
    required: true,
    description: PATH_PARAMETER_DOCS[name!] ?? name,
    schema: { type: 'string' },
  }));
}

/** multipart/form-data: the JSON body's fields as form fields, objects and arrays as JSON strings, files in `attachments`. */
function multipartSchema(body: z.ZodObject): Json {
  const properties: Record<string, Json> = {};
  for (const name of Object.keys(body.shape)) {
    properties[name] =
      name === 'attachments'
        ? {
            type: 'array',
            items: { type: 'string', contentMediaType: 'application/octet-stream' },
            description: 'Files; also accepts a JSON string of attachment objects.',
          }
        : JSON_FIELDS.has(name)
          ? { type: 'string', contentMediaType: 'application/json', description: `\`${name}\` as a JSON string.` }
          : { type: 'string' };
  }
  return { type: 'object', properties, required: ['account_id'] };
}

const statusDescription = (status: number) =>
  Object.entries(ERROR_KINDS)
    .filter(([, kind]) => kind.status === status)
    .map(([name, kind]) => `\`errors/${name}\`: ${kind.title}`)
    .join('; ');

function responses(op: Operation): Json {
  const out: Json = {};
  const okStatus = String(op.okStatus ?? 200);
  if (op.ok instanceof z.ZodType) {
    out[okStatus] = { description: 'OK', content: { 'application/json': { schema: ref(idOfSchema(op.ok)) } } };
  } else {
    out[okStatus] = {
      description: op.ok.description,
      ...(op.okStatus === 302
        ? { headers: { Location: { schema: { type: 'string' }, description: 'The link.' } } }
        : {
            content: {
              [op.ok.mediaType]: { schema: op.ok.schema ?? { type: 'string', contentMediaType: op.ok.mediaType } },
            },
          }),
    };
  }
  if (op.accepted)
    out['202'] = { description: 'Accepted', content: { 'application/json': { schema: ref(idOfSchema(op.accepted)) } } };
  const statuses = new Set(op.errors);
  if (!op.public) for (const s of [401, 429, 500]) statuses.add(s);
  if (op.body) statuses.add(413);
  for (const status of [...statuses].sort()) {
    out[String(status)] = {
      description: statusDescription(status),
      content: { 'application/json': { schema: ref('Error') } },
      ...(status === 429
        ? { headers: { 'Retry-After': { schema: { type: 'integer' }, description: 'Seconds to wait.' } } }
        : {}),
    };
  }
  return out;
}

export function operationObject(op: Operation, requestSchemas: Record<string, Json>): Json {
  const parameters = [...pathParameters(op.path), ...(op.query ? queryParameters(op.query) : [])];
  if (op.idempotent)
    parameters.push({
      name: IDEMPOTENCY_HEADER,
      in: 'header',
      required: false,
      description:
        'Any string up to 255 characters. A repeat with the same key within 24 h returns the first result and sends nothing; while the first is in progress, 409.',
      schema: { type: 'string', maxLength: 255 },
    });
  let requestBody: Json | undefined;
  if (op.body) {
    requestSchemas[op.body.name] = jsonSchema(op.body.schema, 'input');
    const content: Json = {
      'application/json': {
        schema: ref(op.body.name),
        ...(op.body.example === undefined ? {} : { example: op.body.example }),
      },
    };
    if (op.body.multipart) {
      requestSchemas[`${op.body.name}Multipart`] = multipartSchema(op.body.schema as z.ZodObject);
      content['multipart/form-data'] = {
        schema: ref(`${op.body.name}Multipart`),
        encoding: { attachments: { contentType: 'application/octet-stream' } },
      };
    }
    requestBody = { required: true, content };
  }
  return {
    operationId: op.operationId,
    tags: [op.tag],
    summary: op.summary,
    ...(op.description ? { description: op.description } : {}),
    ...(op.public ? { security: [] } : {}),
    ...(parameters.length ? { parameters } : {}),
    ...(requestBody ? { requestBody } : {}),
    responses: responses(op),
  };
}

/** The full path of an operation as served (`/api/v1/...` or `/t/...`). */
export const fullPath = (op: Pick<Operation, 'path' | 'base'>) => `${op.base ?? '/api/v1'}${op.path}`;

function buildDocument(): Json {
  const requestSchemas: Record<string, Json> = {};
  const paths: Record<string, Json> = {};
  for (const op of OPERATIONS) {
    paths[fullPath(op)] = { ...paths[fullPath(op)], [op.method]: operationObject(op, requestSchemas) };
  }
  const tags = [...new Set(OPERATIONS.map((op) => op.tag))].map((name) => ({ name }));
  return {
    openapi: '3.1.0',
    info: { title: 'mailbox-edge email API', version: '1.0.0', description: API_DESCRIPTION(MAX_LIMIT) },
    tags,
    security: [{ ApiKey: [] }],
    paths,
    webhooks: webhookOperations(),
    components: {
      securitySchemes: {
        ApiKey: {
          type: 'apiKey',
          in: 'header',
          name: 'X-API-KEY',
          description: 'Created with `POST /api/v1/api-keys` (or the admin key). Every key has full access.',
        },
      },
      schemas: { ...responseComponents(), ...requestSchemas },
    },
  };
}

let cached: Json | undefined;

export function openApiDocument(): Json {
  cached ??= buildDocument();
  return cached;
}
