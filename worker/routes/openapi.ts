/**
 * The API's description, public (no key): GET /api/v1/openapi.json (OpenAPI 3.1, generated from the
 * zod schemas) and GET /api/v1/docs (a reference page rendered from it, with its stylesheet).
 */
import { Hono } from 'hono';
import type { AppEnv } from '../env.ts';
import { DOCS_CSS, docsPage } from '../openapi/docs-page.ts';
import { openApiDocument } from '../openapi/document.ts';

let page: string | undefined;

export const openApi = new Hono<AppEnv>()
  .get('/openapi.json', (c) => c.json(openApiDocument()))
  .get('/docs', (c) => {
    page ??= docsPage(openApiDocument(), 'docs/style.css');
    return c.html(page);
  })
  .get('/docs/style.css', () => new Response(DOCS_CSS, { headers: { 'Content-Type': 'text/css; charset=utf-8' } }));
