// POST /mcp inside workerd: the SDK's own client speaks to the Worker; the key is checked before
// anything else (counted in D1 queries); the tools' inputs are the REST operations' inputs, and what
// the REST API refuses, the tools refuse in the same words.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../worker/app.ts';
import { BODY_TEXT_LIMIT, THREAD_BODY_LIMIT } from '../../worker/mcp/present.ts';
import { openApiDocument } from '../../worker/openapi/document.ts';
import { ADMIN_KEY, api } from './helpers.ts';
import { meteredEnv, newMeter } from './metered.ts';
import { readAccount } from './read-helpers.ts';

const app = createApp();
const meter = newMeter();

/** The Worker's fetch with every D1 query counted. */
async function workerFetch(input: RequestInfo | URL, init?: RequestInit): Promise<Response> {
  const ctx = createExecutionContext();
  const response = await app.fetch(new Request(input, init), meteredEnv(env, meter), ctx);
  await waitOnExecutionContext(ctx);
  return response;
}

const clients: Client[] = [];
async function connect(headers: Record<string, string> = { Authorization: `Bearer ${ADMIN_KEY}` }) {
  const client = new Client({ name: 'mcp-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL('https://mail.example.com/mcp'), {
    fetch: workerFetch,
    requestInit: { headers },
  });
  await client.connect(transport);
  clients.push(client);
  return { client, transport };
}

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
});

const TOOLS = {
  list_accounts: 'listAccounts',
  list_folders: 'listFolders',
  search_emails: 'listEmails',
  get_email: 'getEmail',
  get_thread: 'getThread',
  send_email: 'sendEmail',
  create_draft: 'createDraft',
  update_email: 'modifyEmail',
  trash_email: 'trashEmail',
  list_contacts: 'listContacts',
} as const;

let account: Awaited<ReturnType<typeof readAccount>>;
beforeAll(async () => {
  account = await readAccount('mcp@example.com');
  await account.deliver('INBOX', { subject: 'Quarterly numbers', text: 'The figures are attached.' });
});

describe('the MCP endpoint', () => {
  it('initializes with the latest protocol version and lists the ten tools with their annotations', async () => {
    const { client, transport } = await connect();
    expect(client.getServerVersion()?.name).toBe('mailbox-edge');
    expect(transport.protocolVersion).toBe(LATEST_PROTOCOL_VERSION);
    expect(transport.protocolVersion! >= '2025-06-18').toBe(true);
    expect(transport.sessionId).toBeUndefined();
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(Object.keys(TOOLS).sort());
    const byName = new Map(tools.map((t) => [t.name, t]));
    for (const name of ['list_accounts', 'list_folders', 'search_emails', 'get_email', 'get_thread', 'list_contacts'])
      expect(byName.get(name)!.annotations, name).toMatchObject({ readOnlyHint: true });
    for (const name of ['send_email', 'create_draft', 'update_email'])
      expect(byName.get(name)!.annotations, name).toMatchObject({ readOnlyHint: false, destructiveHint: false });
    expect(byName.get('trash_email')!.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true });
  });

  it('answers a tool with structured content and a short summary', async () => {
    const { client } = await connect({ 'X-API-KEY': ADMIN_KEY });
    const found = await client.callTool({ name: 'search_emails', arguments: { q: 'quarterly', limit: 5 } });
    expect(found.isError).toBeFalsy();
    const emails = (found.structuredContent as any).emails;
    expect(emails.map((e: any) => e.subject)).toEqual(['Quarterly numbers']);
    expect((found.content as any)[0].text).toBe('1 email');
    expect(JSON.parse((found.content as any)[1].text)).toEqual(found.structuredContent);
    const read = await client.callTool({ name: 'get_email', arguments: { email_id: emails[0].id } });
    expect((read.structuredContent as any).body).toMatchObject({
      text: 'The figures are attached.',
      offset: 0,
      next_offset: null,
    });
  });

  it('cuts long bodies at the documented length, reads on with body_offset, and reduces HTML to text', async () => {
    const long = `${'All work and no play. '.repeat(2100)}THE END`;
    await account.deliver('INBOX', { subject: 'Long read', text: long });
    const html = [
      'From: News <news@example.test>',
      'To: mcp@example.com',
      'Subject: Newsletter',
      `Date: ${new Date().toUTCString()}`,
      `Message-ID: <${crypto.randomUUID()}@example.test>`,
      'MIME-Version: 1.0',
      'Content-Type: text/html; charset=utf-8',
      '',
      '<html><head><style>p{color:red}</style></head><body><p>Big <b>news</b> &amp; more</p><script>x()</script></body></html>',
      '',
    ].join('\r\n');
    await account.deliverRaw('INBOX', [{ raw: html }]);
    const { client } = await connect();
    const search = async (subject: string) =>
      ((await client.callTool({ name: 'search_emails', arguments: { subject } })).structuredContent as any).emails[0];

    const longId = (await search('Long read')).id;
    const parts: string[] = [];
    let offset: number | null = 0;
    while (offset !== null) {
      const read = await client.callTool({ name: 'get_email', arguments: { email_id: longId, body_offset: offset } });
      const body = (read.structuredContent as any).body;
      expect(body.text.length).toBeLessThanOrEqual(BODY_TEXT_LIMIT);
      expect(body.length).toBe(long.length);
      if (body.next_offset !== null) expect(body.note).toContain(`body_offset ${body.next_offset}`);
      else expect(body.note).toBeUndefined();
      parts.push(body.text);
      offset = body.next_offset;
    }
    expect(parts).toHaveLength(3);
    expect(parts.join('')).toBe(long);
    const beyond = await client.callTool({ name: 'get_email', arguments: { email_id: longId, body_offset: 99_999 } });
    expect((beyond.content as any)[0].text).toBe(`body_offset: the body has only ${long.length} characters`);

    const thread = await client.callTool({
      name: 'get_thread',
      arguments: { account_id: account.id, email_id: longId },
    });
    const [inThread] = (thread.structuredContent as any).emails;
    expect(inThread.body.text).toHaveLength(THREAD_BODY_LIMIT);
    expect(inThread.body.note).toContain(
      `Call get_email with email_id "${longId}" and body_offset ${THREAD_BODY_LIMIT}`,
    );

    const news = await client.callTool({ name: 'get_email', arguments: { email_id: (await search('Newsletter')).id } });
    expect((news.structuredContent as any).body.text).toBe('Big news & more');
    const withHeaders = await client.callTool({
      name: 'search_emails',
      arguments: { subject: 'Newsletter', include_headers: true },
    });
    expect((withHeaders.structuredContent as any).emails[0].headers).toContainEqual({
      name: 'Subject',
      value: 'Newsletter',
    });
  });

  it('takes one message per request, within 4 MB', async () => {
    const post = (body: string) =>
      workerFetch('https://mail.example.com/mcp', {
        method: 'POST',
        headers: {
          Authorization: `Bearer ${ADMIN_KEY}`,
          'Content-Type': 'application/json',
          Accept: 'application/json, text/event-stream',
        },
        body,
      });
    const call = { jsonrpc: '2.0', method: 'tools/call', params: { name: 'list_accounts', arguments: {} } };
    meter.d1 = 0;
    const batch = await post(JSON.stringify([1, 2, 3].map((id) => ({ ...call, id }))));
    expect(batch.status).toBe(400);
    expect(await batch.json()).toMatchObject({ error: { code: -32600 } });
    expect(meter.d1).toBe(0);
    const tooBig = await post(JSON.stringify({ ...call, id: 1, params: { ...call.params, pad: 'x'.repeat(4 << 20) } }));
    expect(tooBig.status).toBe(413);
    expect(await tooBig.json()).toMatchObject({ type: 'errors/payload_too_large' });
    expect((await post('{"jsonrpc": "2.0", ')).status).toBe(400);
  });

  it('answers GET and DELETE with 405 (stateless: no stream, no session)', async () => {
    for (const method of ['GET', 'DELETE']) {
      const res = await workerFetch('https://mail.example.com/mcp', {
        method,
        headers: { Authorization: `Bearer ${ADMIN_KEY}`, Accept: 'text/event-stream' },
      });
      expect(res.status).toBe(405);
      expect(res.headers.get('Allow')).toBe('POST');
    }
  });
});

describe('authentication', () => {
  const callBody = JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params: { name: 'search_emails', arguments: { q: 'quarterly' } },
  });
  const post = (headers: Record<string, string>, body = callBody) =>
    workerFetch('https://mail.example.com/mcp', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers },
      body,
    });

  it('refuses a request without a key, with a wrong key or with a revoked key with 401, before anything runs', async () => {
    const created = await api('POST', '/api-keys', { body: { name: 'agent' } });
    const key: string = created.body.key;
    meter.d1 = 0;
    expect((await post({ Authorization: `Bearer ${key}` })).status).toBe(200);
    expect(meter.d1).toBeGreaterThan(2);
    await api('DELETE', `/api-keys/${created.body.id}`);

    for (const [headers, queries] of [
      [{}, 0],
      [{ Authorization: 'Basic abc' }, 0],
      [{ Authorization: 'Bearer mbx_wrong' }, 1],
      [{ Authorization: `Bearer ${key}` }, 1],
      [{ 'X-API-KEY': key }, 1],
    ] as const) {
      meter.d1 = 0;
      const res = await post(headers);
      expect(res.status, JSON.stringify(headers)).toBe(401);
      expect(res.headers.get('WWW-Authenticate')).toMatch(/^Bearer /);
      expect(await res.json()).toMatchObject({ status: 401, type: 'errors/unauthorized' });
      // The key lookup and nothing else: no tool ran.
      expect(meter.d1, JSON.stringify(headers)).toBe(queries);
    }
    // The body is not even read: not JSON, still 401.
    expect((await post({}, '{not json')).status).toBe(401);
    await expect(connect({ Authorization: `Bearer ${key}` })).rejects.toThrow(/401/);
  });
});

describe('one rule set: the tools take the REST operations’ inputs', () => {
  it("gives each tool its operation's parameters and body fields, with the OpenAPI document's schemas", async () => {
    const doc = openApiDocument() as any;
    const { client } = await connect();
    const { tools } = await client.listTools();
    for (const tool of tools) {
      const operationId = TOOLS[tool.name as keyof typeof TOOLS];
      const [path, method] = Object.entries(doc.paths).flatMap(([p, item]: [string, any]) =>
        Object.entries(item)
          .filter(([, op]: [string, any]) => op.operationId === operationId)
          .map(([m]) => [p, m]),
      )[0]!;
      const op = doc.paths[path!][method!];
      const expected: Record<string, unknown> = {};
      for (const p of op.parameters ?? [])
        expected[p.in === 'header' ? p.name.toLowerCase().replaceAll('-', '_') : p.name] = {
          ...p.schema,
          description: p.description,
        };
      const bodyRef: string | undefined = op.requestBody?.content['application/json'].schema.$ref;
      if (bodyRef) Object.assign(expected, doc.components.schemas[bodyRef.split('/').pop()!].properties);
      const { body_offset: _own, ...properties } = tool.inputSchema.properties as Record<string, unknown>;
      expect(properties, tool.name).toEqual(expected);
    }
  });

  it('refuses what the REST API refuses, with its message', async () => {
    const { client } = await connect();
    const acc = account.id;
    const cases: [string, Record<string, unknown>, string, string, unknown?][] = [
      ['search_emails', { limit: 0 }, 'GET', '/emails?limit=0'],
      ['search_emails', { unread: 'maybe' }, 'GET', '/emails?unread=maybe'],
      ['search_emails', { after: 'yesterday' }, 'GET', '/emails?after=yesterday'],
      ['search_emails', { role: 'nowhere' }, 'GET', '/emails?role=nowhere'],
      ['search_emails', { cursor: 'not-a-cursor' }, 'GET', '/emails?cursor=not-a-cursor'],
      ['search_emails', { q: ' ' }, 'GET', '/emails?q=%20'],
      ['get_email', { email_id: 'email_malformed' }, 'GET', '/emails/email_malformed'],
      ['get_thread', { account_id: acc, email_id: 'nope' }, 'GET', `/${acc}/emails/nope/thread`],
      ['list_folders', {}, 'GET', '/folders'],
      ['list_accounts', { offset: -1 }, 'GET', '/accounts?offset=-1'],
      ['list_contacts', { q: '' }, 'GET', '/contacts?q='],
      ['update_email', { email_id: 'email_x', unread: 'yes' }, 'PUT', '/emails/email_x', { unread: 'yes' }],
      ['trash_email', { email_id: 'email_x' }, 'DELETE', '/emails/email_x'],
    ];
    const bad = { account_id: acc, to: [{ identifier: 'not an address' }], color: 'red' };
    cases.push(['send_email', bad, 'POST', '/emails', bad]);
    cases.push([
      'create_draft',
      { account_id: acc, subject: 'a\r\nb' },
      'POST',
      '/drafts',
      { account_id: acc, subject: 'a\r\nb' },
    ]);
    cases.push(['send_email', { account_id: acc, idempotency_key: '' }, 'POST', '/emails', { account_id: acc }]);
    for (const [name, args, method, path, body] of cases) {
      const rest = await api(method, path, {
        body,
        headers: 'idempotency_key' in args ? { 'Idempotency-Key': '' } : {},
      });
      expect(rest.status, `${method} ${path}`).toBeGreaterThanOrEqual(400);
      const result = await client.callTool({ name, arguments: args });
      expect(result.isError, name).toBe(true);
      expect((result.content as any)[0].text, `${name} ${JSON.stringify(args)}`).toBe(rest.body.detail);
      expect((result.structuredContent as any).error).toEqual(rest.body);
    }
  });

  it('refuses arguments no REST input has, and its own body_offset by the query-string rules', async () => {
    const { client } = await connect();
    const unknown = await client.callTool({ name: 'search_emails', arguments: { sender: 'a@b.c' } });
    expect(unknown.isError).toBe(true);
    expect((unknown.content as any)[0].text).toBe('arguments: unknown field sender');
    const offset = await client.callTool({ name: 'get_email', arguments: { email_id: 'email_x', body_offset: -5 } });
    expect((offset.content as any)[0].text).toBe('body_offset: must be an integer at least 0');
  });
});
