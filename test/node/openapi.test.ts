// The contract checks itself: the generated OpenAPI 3.1 document is valid (an independent validator),
// names every route the Hono app serves and nothing else, its schemas compile, and the committed
// client files are exactly what the code generates.
import { readFileSync } from 'node:fs';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { DOCUMENT_FILE, generated, TYPES_FILE } from '../../client/generate.ts';
import { createApp } from '../../worker/app.ts';
import { openApiDocument } from '../../worker/openapi/document.ts';

type Json = Record<string, any>;
const doc = openApiDocument() as Json;

/** Routes outside the public API: the gateway's signed side door, and the dashboard's mail frame. */
const UNDOCUMENTED = /^\/(internal|mail-view)(\/|$)/;

describe('the OpenAPI document', () => {
  it('validates as OpenAPI 3.1', async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(doc));
    expect(result.errors ?? [], JSON.stringify(result.errors, null, 2)?.slice(0, 3000)).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  it('lists every route the app serves, and only those', () => {
    const served = createApp()
      .routes.filter((r) => r.method !== 'ALL' && !UNDOCUMENTED.test(r.path))
      .map((r) => `${r.method} ${r.path.replace(/:(\w+)/g, '{$1}')}`);
    const documented = Object.entries(doc.paths as Record<string, Json>).flatMap(([path, item]) =>
      Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`),
    );
    expect(served.length).toBeGreaterThan(35);
    expect(
      served.filter((r) => !documented.includes(r)),
      'served but not documented',
    ).toEqual([]);
    expect(
      documented.filter((r) => !served.includes(r)),
      'documented but not served',
    ).toEqual([]);
    expect(new Set(served).size).toBe(served.length);
  });

  it('has a webhook for each of the 20 event types and compiling schemas for every component', () => {
    expect(Object.keys(doc.webhooks)).toHaveLength(20);
    const ajv = new Ajv2020({ strict: false });
    addFormats.default(ajv);
    const base = 'https://mailbox-edge.test/openapi.json';
    ajv.addSchema({ $id: base, components: doc.components });
    for (const name of Object.keys(doc.components.schemas))
      expect(ajv.getSchema(`${base}#/components/schemas/${name}`), name).toBeTypeOf('function');
    // Every operation answers its errors in the one error shape.
    for (const item of Object.values(doc.paths as Record<string, Json>))
      for (const op of Object.values(item as Record<string, Json>))
        for (const [status, response] of Object.entries(op.responses as Record<string, Json>))
          if (Number(status) >= 400)
            expect(response.content['application/json'].schema.$ref).toBe('#/components/schemas/Error');
  });

  it('is what client/openapi.json and client/schema.d.ts hold (run `npm run client` after changing the API)', async () => {
    const { document, types } = await generated();
    expect(readFileSync(DOCUMENT_FILE, 'utf8')).toBe(document);
    expect(readFileSync(TYPES_FILE, 'utf8')).toBe(types);
  });
});
