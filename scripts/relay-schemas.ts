/**
 * Writes gateway/relay-schemas.json: the zod schemas of common/relay.ts that the gateway receives
 * from the Worker, as JSON Schema (the shape an arriving value must have), so that the gateway
 * checks the Worker's answers and requests without loading zod (gateway/relay-checks.ts). `npm run
 * relay-schemas` after changing common/relay.ts; test/node/relay-schemas.test.ts fails while the
 * committed file is stale.
 */
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import {
  ChangesResponse,
  HeartbeatResponse,
  LeaseResponse,
  OutgoingMessage,
  StagedPart,
  StagedUpload,
  WorkerToGateway,
} from '../common/relay.ts';

export const RELAY_SCHEMAS_FILE = join(dirname(fileURLToPath(import.meta.url)), '..', 'gateway', 'relay-schemas.json');

/** What the Worker sends the gateway: the answers to its calls, and the control socket's requests. */
const RECEIVED_BY_GATEWAY = {
  HeartbeatResponse,
  LeaseResponse,
  ChangesResponse,
  OutgoingMessage,
  StagedUpload,
  StagedPart,
  WorkerToGateway,
};

export function relaySchemasJson(): string {
  const schemas: Record<string, unknown> = {};
  for (const [name, zodSchema] of Object.entries(RECEIVED_BY_GATEWAY)) {
    const { $schema: _, ...schema } = z.toJSONSchema(zodSchema, { io: 'input', unrepresentable: 'throw' });
    // The gateway gets the value as it arrived: a schema whose parse would change it (a default, a
    // transform, a coercion) cannot be checked this way, and its input and output shapes differ.
    const { $schema: __, ...output } = z.toJSONSchema(zodSchema, { io: 'output', unrepresentable: 'throw' });
    if (JSON.stringify(stripClosed(output)) !== JSON.stringify(schema))
      throw new Error(`${name}: parsing changes the value (default, transform or coercion): not checkable without zod`);
    schemas[name] = schema;
  }
  return `${JSON.stringify(schemas, null, 2)}\n`;
}

/** The output shape closes objects (`additionalProperties: false`); the input shape does not. */
function stripClosed(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(stripClosed);
  if (!schema || typeof schema !== 'object') return schema;
  return Object.fromEntries(
    Object.entries(schema)
      .filter(([key, value]) => !(key === 'additionalProperties' && value === false))
      .map(([key, value]) => [key, stripClosed(value)]),
  );
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(RELAY_SCHEMAS_FILE, relaySchemasJson());
  console.log('wrote gateway/relay-schemas.json');
}
