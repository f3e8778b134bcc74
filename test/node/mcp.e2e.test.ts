// End to end: an AI agent's view. The MCP SDK's own client talks to POST /mcp of `npm start`
// (workerd), with an API key made through the REST API, against a real Dovecot and Postfix and the
// real gateway. What the tools did is checked in the mailboxes over IMAP.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { ImapFlow } from 'imapflow';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { uidsWithSubject, flagsOf, openImap } from '../mailserver/client.ts';
import type { MailServer } from '../mailserver/mailserver.ts';
import { connectMailbox } from './connect.ts';
import { dumpLogsOnFailure, eventually, startEndToEnd, stopEndToEnd, type Service } from './service.ts';

let mail: MailServer;
let service: Service;
let alice: { id: string; email: string };
let key: { id: string; key: string };
let agent: Client;
let aliceImap: ImapFlow;
let bobImap: ImapFlow;

const user = (name: string) => mail.users.find((u) => u.user === name)!;
const tag = Math.random().toString(36).slice(2, 8);

async function mcpClient(headers: Record<string, string>): Promise<Client> {
  const client = new Client({ name: 'e2e-agent', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${service.base}/mcp`), { requestInit: { headers } }));
  return client;
}

/** A tool call that must succeed; its structured content. */
async function call(name: string, args: Record<string, unknown>): Promise<any> {
  const result = await agent.callTool({ name, arguments: args });
  if (result.isError) throw new Error(`${name}: ${JSON.stringify(result.content)}`);
  return result.structuredContent;
}

beforeAll(async () => {
  ({ mail, service } = await startEndToEnd('gw-mcp'));
  alice = await connectMailbox(service, mail.info(), 'alice');
  key = (await service.api('POST', '/api-keys', { name: 'agent' })).body;
  agent = await mcpClient({ Authorization: `Bearer ${key.key}` });
  aliceImap = await openImap(mail.info(), 'alice');
  bobImap = await openImap(mail.info(), 'bob');
}, 180_000);

afterEach((ctx) => dumpLogsOnFailure(ctx, service));

afterAll(async () => {
  await agent?.close().catch(() => undefined);
  await aliceImap?.logout().catch(() => undefined);
  await bobImap?.logout().catch(() => undefined);
  await stopEndToEnd({ mail, service });
});

describe('an MCP client against npm start', () => {
  it('initializes and lists the tools', async () => {
    expect(agent.getServerVersion()?.name).toBe('mailbox-edge');
    const { tools } = await agent.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(
      [
        'create_draft',
        'get_email',
        'get_thread',
        'list_accounts',
        'list_contacts',
        'list_folders',
        'search_emails',
        'send_email',
        'trash_email',
        'update_email',
      ].sort(),
    );
    const accounts = await call('list_accounts', {});
    expect(accounts.data.map((a: any) => a.id)).toEqual([alice.id]);
  });

  let emailId: string;
  const subject = `Invoice ${tag} for November`;

  it('finds delivered mail by subject and by full-text search, and reads it as text', async () => {
    await mail.deliver({
      from: 'billing@remote.test',
      to: user('alice').email,
      subject,
      html: `<p>Hello Alice,</p><p>the amount due is <b>42 euros</b>; reference zq${tag}.</p>`,
    });
    const bySubject = await eventually(
      async () => (await call('search_emails', { account_id: alice.id, subject: `Invoice ${tag}` })).emails[0],
      { what: 'the delivered email through search_emails', timeoutMs: 60_000, intervalMs: 300 },
    );
    expect(bySubject).toMatchObject({ subject, from: 'billing@remote.test', unread: true });
    emailId = bySubject.id;
    const byText = await eventually(
      async () => (await call('search_emails', { q: `zq${tag}`, unread: true, limit: 10 })).emails,
      { what: 'full-text search' },
    );
    expect(byText.map((e: any) => e.id)).toEqual([emailId]);

    const email = await call('get_email', { email_id: emailId });
    expect(email.subject).toBe(subject);
    expect(email.body.text).toContain('the amount due is 42 euros');
    expect(email.body.text).not.toContain('<b>');
    expect(email.body.next_offset).toBeNull();
  });

  it('marks it read on the server with update_email', async () => {
    const [uid] = await uidsWithSubject(aliceImap, 'INBOX', subject);
    expect((await flagsOf(aliceImap, 'INBOX', uid!)).has('\\Seen')).toBe(false);
    const updated = await call('update_email', { email_id: emailId, unread: false });
    expect(updated).toMatchObject({ id: emailId, unread: false });
    expect((await flagsOf(aliceImap, 'INBOX', uid!)).has('\\Seen')).toBe(true);
  });

  it('sends mail with send_email', async () => {
    const sentSubject = `Agent note ${tag}`;
    const sent = await call('send_email', {
      account_id: alice.id,
      to: [{ identifier: user('bob').email }],
      subject: sentSubject,
      body_plain: 'Sent by an agent.',
      idempotency_key: `agent-${tag}`,
    });
    expect(sent).toMatchObject({ object: 'EmailSent', account_id: alice.id });
    const uids = await eventually(
      async () => {
        const found = await uidsWithSubject(bobImap, 'INBOX', sentSubject);
        return found.length ? found : null;
      },
      { what: "the agent's email in bob's INBOX" },
    );
    expect(uids).toHaveLength(1);
  });

  it("refuses a malformed id and a bad filter as tool errors in the REST API's words", async () => {
    for (const [name, args, path] of [
      ['get_email', { email_id: 'email_123' }, '/emails/email_123'],
      ['search_emails', { limit: 1000 }, '/emails?limit=1000'],
      ['search_emails', { before: 'last week' }, '/emails?before=last%20week'],
    ] as const) {
      const rest = await service.api('GET', path);
      expect(rest.status).toBeGreaterThanOrEqual(400);
      const result = await agent.callTool({ name, arguments: args });
      expect(result.isError).toBe(true);
      expect((result.content as any)[0].text).toBe(rest.body.detail);
    }
  });

  it('answers 401 without a key and with a revoked key', async () => {
    const post = (headers: Record<string, string>) =>
      fetch(`${service.base}/mcp`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
    expect((await post({})).status).toBe(401);
    expect((await post({ Authorization: `Bearer ${key.key}` })).status).toBe(200);
    expect((await service.api('DELETE', `/api-keys/${key.id}`)).status).toBe(200);
    const revoked = await post({ Authorization: `Bearer ${key.key}` });
    expect(revoked.status).toBe(401);
    expect(await revoked.json()).toMatchObject({ type: 'errors/unauthorized' });
    await expect(agent.callTool({ name: 'list_accounts', arguments: {} })).rejects.toThrow(/401/);
  });
});
