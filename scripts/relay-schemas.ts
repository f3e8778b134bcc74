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
  WorkerToGateway,
} from '../common/relay.ts';

export const RELAY_SCHEMAS_FILE = join(dirname(fileURLToPath(import.meta.url)), '..', 'gateway', 'relay-schemas.json');

/** What the Worker sends the gateway: the answers to its calls, and the control socket's requests. */
const RECEIVED_BY_GATEWAY = { HeartbeatResponse, LeaseResponse, ChangesResponse, OutgoingMessage, WorkerToGateway };

export function relaySchemasJson(): string {
  const schemas: Record<string, unknown> = {};
  for (const [name, zodSchema] of Object.entries(RECEIVED_BY_GATEWAY)) {
    const { $schema: _, ...schema } = z.toJSONSchema(zodSchema, { io: 'input', unrepresentable: 'throw' });
    schemas[name] = schema;
  }
  return `${JSON.stringify(schemas, null, 2)}\n`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  writeFileSync(RELAY_SCHEMAS_FILE, relaySchemasJson());
  console.log('wrote gateway/relay-schemas.json');
}
