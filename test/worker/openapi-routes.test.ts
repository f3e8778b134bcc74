// The document and the reference page are served by the Worker itself, without a key.
import { describe, expect, it } from 'vitest';
import { openApiDocument } from '../../worker/openapi/document.ts';
import { api } from './helpers.ts';

describe('GET /api/v1/openapi.json and /api/v1/docs', () => {
  it('serves the generated document without an API key', async () => {
    const res = await api('GET', '/openapi.json', { key: null });
    expect(res.status).toBe(200);
    expect(res.body.openapi).toBe('3.1.0');
    expect(res.body).toEqual(openApiDocument());
  });

  it('serves a reference page rendered from it, without scripts or outside resources', async () => {
    const res = await api('GET', '/docs', { key: null });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    const html = String(res.body);
    expect(html).not.toMatch(/<script/i);
    expect(html).not.toMatch(/(src|href)="https?:/i);
    for (const text of ['POST', '/api/v1/emails', 'sendEmail', 'email.draft.delete', 'EmailListItem', 'X-API-KEY'])
      expect(html).toContain(text);
    const css = await api('GET', '/docs/style.css', { key: null });
    expect(css.status).toBe(200);
    expect(css.headers.get('content-type')).toMatch(/^text\/css/);
  });

  it('still wants a key for everything else', async () => {
    expect((await api('GET', '/emails', { key: null })).status).toBe(401);
    expect((await api('GET', '/docs/other', { key: null })).status).toBe(401);
  });
});
