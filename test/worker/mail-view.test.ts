import { exports } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';

/** A POST to /mail-view as the dashboard's frame (or another site) sends it. */
async function view(fields: Record<string, string>, site = 'same-origin') {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) form.set(name, value);
  return exports.default.fetch('https://mail.example.com/mail-view', {
    method: 'POST',
    body: form,
    headers: { 'Sec-Fetch-Site': site, 'Sec-Fetch-Dest': 'iframe' },
  });
}

const TRICKS =
  '<html><head><style>@import url("https://evil.test/a.css"); body { background: url(https://evil.test/bg.png) }</style>' +
  '<meta http-equiv="refresh" content="0;url=https://evil.test/"><base href="https://evil.test/"></head><body>' +
  '<p style="color: red; background-image: url(\'//evil.test/p.png\')" onclick="alert(1)">Hello</p>' +
  '<script>alert(1)</script><iframe src="https://evil.test/"></iframe><form action="https://evil.test/"><input name=x></form>' +
  '<img src="https://evil.test/pixel.gif" srcset="https://evil.test/2x.gif 2x" alt="pixel"><img src="cid:logo@x" alt="logo">' +
  '<img src="/api/v1/accounts" alt="relative"><a href="javascript:alert(1)">js</a><a href="https://example.com/">link</a>' +
  '<svg><image href="https://evil.test/svg.png"/></svg></body></html>';

describe('the dashboard mail frame (POST /mail-view)', () => {
  it('answers the HTML made inert, with a sandboxing CSP and no remote sources', async () => {
    const res = await view({ html: TRICKS, inline: JSON.stringify({ 'logo@x': 'data:image/png;base64,AAAA' }) });
    expect(res.status).toBe(200);
    const policy = res.headers.get('Content-Security-Policy') ?? '';
    expect(policy).toMatch(/^sandbox allow-popups allow-popups-to-escape-sandbox;/);
    expect(policy).toContain("default-src 'none'");
    expect(policy).toContain('img-src data:;');
    expect(policy).not.toMatch(/script-src|https?:/);
    const html = await res.text();
    expect(html).not.toMatch(/evil\.test|<script|<iframe|<form|<input|<meta|<base|onclick|javascript:|\/api\/v1/i);
    expect(html).toContain('Hello');
    expect(html).toContain('color: red');
    expect(html).toContain('src="data:image/png;base64,AAAA"');
    expect(html).toContain('<a href="https://example.com/" target="_blank" rel="noopener noreferrer">link</a>');
  });

  it('keeps remote images when asked, and counts what it holds back', async () => {
    const res = await view({ html: TRICKS, remote: '1' });
    expect(res.headers.get('Content-Security-Policy')).toContain('img-src data: https: http:;');
    const html = await res.text();
    expect(html).toContain('src="https://evil.test/pixel.gif"');
    expect(html).not.toMatch(/<script|onclick|@import/);
    const count = await view({ html: TRICKS, mode: 'count' });
    // @import, the style's url(), the attribute's url(), the img src and srcset, the svg image.
    expect(await count.json()).toEqual({ held: 6 });
  });

  it('answers only the dashboard itself', async () => {
    for (const site of ['cross-site', 'same-site', 'none'])
      expect((await view({ html: '<b>x</b>' }, site)).status).toBe(404);
  });
});
