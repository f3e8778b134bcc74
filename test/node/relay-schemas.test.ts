/**
 * The gateway checks what the Worker sends it against JSON Schemas generated from common/relay.ts
 * (gateway/relay-checks.ts, gateway/json-schema.ts) instead of loading zod. These tests keep the
 * generated file fresh and compare the two checks value by value: valid messages, and every
 * mutation of them (a field removed, or replaced by a value of another type or range), must be
 * accepted or refused by the gateway's check exactly as zod accepts or refuses them.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import {
  ChangesResponse,
  HeartbeatResponse,
  LeaseResponse,
  OutgoingMessage,
  StagedPart,
  StagedUpload,
  WorkerToGateway,
} from '../../common/relay.ts';
import { compileSchema } from '../../gateway/json-schema.ts';
import { relayCheck, type RelayCheckedName } from '../../gateway/relay-checks.ts';
import { RELAY_SCHEMAS_FILE, relaySchemasJson } from '../../scripts/relay-schemas.ts';

const server = { host: 'imap.example.com', port: 993, encryption: 'SSL', user: 'alice', password: 'secret' };
const cursor = { path: 'INBOX', uidvalidity: 7, last_uid: 42, highest_modseq: '1001', resync: true };

const SAMPLES: { [K in RelayCheckedName]: { zod: z.ZodType; valid: unknown[] } } = {
  HeartbeatResponse: {
    zod: HeartbeatResponse,
    valid: [{ lost: ['acc_1'], claimable: [], release: ['acc_2'], lease_ttl_ms: 60_000 }],
  },
  LeaseResponse: {
    zod: LeaseResponse,
    valid: [
      {
        granted: true,
        account_id: 'acc_1',
        config: { email: 'alice@example.com', display_name: null, imap: server, smtp: { ...server, port: 465 } },
        cursors: [cursor, { ...cursor, path: 'Sent', highest_modseq: null, resync: undefined }],
        lease_ttl_ms: 60_000,
        initial_sync: { since: '2026-11-01T00:00:00Z', folders: [{ path: 'INBOX', uidvalidity: 7, below_uid: 40 }] },
      },
      { granted: false, holder: 'gw-2' },
      { granted: false, holder: null },
    ],
  },
  ChangesResponse: { zod: ChangesResponse, valid: [{ cursors: [cursor] }, { cursors: [] }] },
  OutgoingMessage: {
    zod: OutgoingMessage,
    valid: [] as unknown[],
  },
  StagedUpload: { zod: StagedUpload, valid: [{ upload_id: 'up-1' }] },
  StagedPart: { zod: StagedPart, valid: [{ etag: '"abc"' }] },
  WorkerToGateway: {
    zod: WorkerToGateway,
    valid: [
      { type: 'request', id: 'r1', request: { op: 'rebalance' } },
      { type: 'request', id: 'r2', request: { op: 'claim', account_id: 'acc_1' } },
      {
        type: 'request',
        id: 'r3',
        request: {
          op: 'verify',
          config: { email: 'a@b.c', display_name: 'A', imap: server, smtp: { ...server, encryption: 'STARTTLS' } },
        },
      },
      {
        type: 'request',
        id: 'r4',
        request: { op: 'send', account_id: 'acc_1', mode: 'draft', key: 'k', append_to: null },
      },
      {
        type: 'request',
        id: 'r5',
        request: {
          op: 'modify',
          account_id: 'acc_1',
          steps: [
            { type: 'flags', path: 'INBOX', uidvalidity: 7, uid: 3, add: ['\\Seen'], remove: [] },
            { type: 'move', path: 'INBOX', uidvalidity: 7, uid: 4, destination: 'Archive' },
            { type: 'delete', path: 'INBOX', uidvalidity: 7, uid: 5 },
          ],
        },
      },
    ],
  },
};

/** A valid OutgoingMessage, built from its schema's own fields so that the sample follows the protocol. */
function outgoingSample(): unknown {
  const shape = (OutgoingMessage as unknown as z.ZodObject).shape;
  const sample: Record<string, unknown> = {};
  for (const [name, field] of Object.entries(shape)) sample[name] = sampleOf(field as z.ZodType);
  return sample;
}

function sampleOf(schema: z.ZodType): unknown {
  const def = (schema as unknown as { def: { type: string; [k: string]: unknown } }).def;
  switch (def.type) {
    case 'string':
      return 'text';
    case 'number':
      return 1;
    case 'boolean':
      return true;
    case 'nullable':
    case 'optional':
      return sampleOf(def.innerType as z.ZodType);
    case 'array':
      return [sampleOf(def.element as z.ZodType)];
    case 'enum':
      return Object.values(def.entries as Record<string, unknown>)[0];
    case 'literal':
      return (def.values as unknown[])[0];
    case 'object':
      return Object.fromEntries(
        Object.entries(def.shape as Record<string, z.ZodType>).map(([k, v]) => [k, sampleOf(v)]),
      );
    case 'record':
      return {};
    default:
      throw new Error(`no sample for a ${def.type}`);
  }
}
SAMPLES.OutgoingMessage.valid.push(outgoingSample());

const REPLACEMENTS: unknown[] = [null, 'x', '', -1, 0, 1.5, 2 ** 60, true, [], {}, ['x'], [{}]];

/** Every value a single change of `value` can give: a field or item removed, or replaced. */
function* mutations(value: unknown): Generator<unknown> {
  for (const replacement of REPLACEMENTS) yield replacement;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      yield value.filter((_, j) => j !== i);
      for (const inner of mutations(value[i])) yield value.map((item, j) => (j === i ? inner : item));
    }
  } else if (value && typeof value === 'object') {
    for (const key of Object.keys(value)) {
      const { [key]: _, ...without } = value as Record<string, unknown>;
      yield without;
      for (const inner of mutations((value as Record<string, unknown>)[key])) yield { ...value, [key]: inner };
    }
  }
}

describe('the gateway checks what the Worker sends without zod', () => {
  it('uses the committed JSON Schemas, which `npm run relay-schemas` made from common/relay.ts', () => {
    expect(readFileSync(RELAY_SCHEMAS_FILE, 'utf8'), 'gateway/relay-schemas.json is stale').toBe(relaySchemasJson());
  });

  for (const [name, { zod, valid }] of Object.entries(SAMPLES) as [
    RelayCheckedName,
    (typeof SAMPLES)[RelayCheckedName],
  ][]) {
    it(`${name}: accepts and refuses exactly what zod does`, () => {
      const check = relayCheck(name);
      let compared = 0;
      let refused = 0;
      for (const sample of valid) {
        const value = JSON.parse(JSON.stringify(sample));
        expect(zod.safeParse(value).success, `zod takes the sample ${JSON.stringify(value)}`).toBe(true);
        expect(check(value)).toEqual(value);
        for (const mutated of mutations(value)) {
          const byZod = zod.safeParse(mutated).success;
          let byGateway = true;
          try {
            check(mutated);
          } catch {
            byGateway = false;
          }
          expect(byGateway, `${name} ${JSON.stringify(mutated)}`).toBe(byZod);
          compared++;
          if (!byZod) refused++;
        }
      }
      expect(refused).toBeGreaterThan(10);
      expect(compared).toBeGreaterThan(refused);
    });
  }

  it('names what does not fit and where', () => {
    expect(() => relayCheck('HeartbeatResponse')({ lost: [], claimable: [7], release: [], lease_ttl_ms: 1 })).toThrow(
      'not a valid HeartbeatResponse: $.claimable[0]: expected string',
    );
    expect(() => relayCheck('ChangesResponse')({})).toThrow('$.cursors: required');
  });

  it('refuses a schema with a keyword it cannot check instead of ignoring it', () => {
    expect(() => compileSchema({ type: 'string', format: 'email' })).toThrow(/format.*not supported/);
    expect(() => compileSchema({ properties: { a: { $ref: '#/$defs/a' } } })).toThrow(/\$ref.*not supported/);
  });
});
