// Webhooks end to end: real Postfix → Dovecot → gateway → workerd → queue → a subscriber on loopback.
import { createHmac } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { readFileSync } from 'node:fs';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openImap } from '../mailserver/client.ts';
import { startMailServer, type MailServer } from '../mailserver/mailserver.ts';
import { dumpLogsOnFailure, eventually, startService, type Service } from './service.ts';

interface Call {
  headers: IncomingHttpHeaders;
  body: string;
  json: any;
}

let mail: MailServer;
let service: Service;
let subscriber: Server;
let subscriberUrl: string;
const calls: Call[] = [];
let endpoint: { id: string; secret: string };
let accountId: string;

const user = (name: string) => mail.users.find((u) => u.user === name)!;
const callsOf = (type: string) => calls.filter((c) => c.json.type === type);

beforeAll(async () => {
  subscriber = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      calls.push({ headers: req.headers, body, json: JSON.parse(body) });
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((r) => subscriber.listen(0, '127.0.0.1', () => r()));
  const address = subscriber.address();
  subscriberUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/hook`;
  mail = await startMailServer();
  service = await startService();
  service.startGateway('gw-hooks', { NODE_EXTRA_CA_CERTS: mail.caFile });
});

afterEach((ctx) => dumpLogsOnFailure(ctx, service));

afterAll(async () => {
  await service?.stop();
  await mail?.stop();
  subscriber?.close();
});

describe('webhooks end to end', () => {
  it('delivers every event the product emits, signed, once per event', async () => {
    const created = await service.api('POST', '/webhooks/endpoints', {
      url: subscriberUrl,
      description: 'everything',
      trigger_events: [
        'email.new', 'email.new.bounce', 'email.update', 'email.delete', 'email.draft.new', 'email.draft.delete',
        'email.folder.create', 'email.folder.update', 'email.folder.delete', 'account.add', 'account.reconnect',
        'account.remove', 'account.status.running', 'account.status.errored', 'account.status.disconnected',
      ],
      headers: [{ key: 'X-Team', value: 'mail' }],
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    endpoint = created.body;
    const alice = user('alice');
    const connect = (extra: Record<string, unknown> = {}) => ({
      provider: 'imap', email: alice.email, password: alice.password, imap_user: alice.user,
      imap_host: mail.host, imap_port: mail.imapPort, imap_encryption: 'SSL',
      smtp_host: mail.host, smtp_port: mail.smtpPort, smtp_encryption: 'STARTTLS', ...extra,
    });
    const account = await eventually(async () => {
      const res = await service.api('POST', '/auth/intent', connect());
      return res.status === 200 ? res.body : null;
    }, { what: 'connecting alice', timeoutMs: 60_000, intervalMs: 500 });
    accountId = account.id;
    await eventually(() => callsOf('account.add').length === 1, { what: 'account.add' });

    // email.new, with a verifiable signature
    await mail.deliver({ from: 'Bob <bob@remote.test>', to: alice.email, subject: 'webhook me', text: 'hello hooks' });
    const [newCall] = await eventually(() => (callsOf('email.new').length ? callsOf('email.new') : null), { what: 'email.new' });
    expect(newCall!.json).toMatchObject({ object: 'Event', type: 'email.new', account_id: accountId, endpoint_id: endpoint.id });
    expect(newCall!.json.id).toMatch(/^evt_/);
    expect(newCall!.json.data).toMatchObject({ object: 'Email', subject: 'webhook me', origin: 'external' });
    expect(newCall!.headers['x-team']).toBe('mail');
    const sig = String(newCall!.headers['x-email-engine-signature']);
    const [, t, v1] = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(sig)!;
    expect(createHmac('sha256', endpoint.secret).update(`${t}.${newCall!.body}`).digest('hex')).toBe(v1);
    expect(newCall!.headers['webhook-id']).toBe(newCall!.json.id);
    const verified = new Webhook(endpoint.secret).verify(newCall!.body, {
      'webhook-id': String(newCall!.headers['webhook-id']),
      'webhook-timestamp': String(newCall!.headers['webhook-timestamp']),
      'webhook-signature': String(newCall!.headers['webhook-signature']),
    });
    expect(verified).toMatchObject({ id: newCall!.json.id });
    const emailId = newCall!.json.data.id;

    // email.update and email.delete, from another client
    const imap = await openImap(mail.info(), 'alice');
    try {
      await imap.mailboxOpen('INBOX');
      await imap.messageFlagsAdd('1:*', ['\\Seen']);
      await eventually(() => callsOf('email.update').some((c) => c.json.data.id === emailId && c.json.data.unread === false), { what: 'email.update' });

      // folders
      await imap.mailboxCreate('Receipts');
      await eventually(() => callsOf('email.folder.create').some((c) => c.json.data.name === 'Receipts'), { what: 'email.folder.create', timeoutMs: 30_000 });
      await imap.mailboxRename('Receipts', 'Invoices');
      await eventually(() => callsOf('email.folder.create').some((c) => c.json.data.name === 'Invoices') || callsOf('email.folder.update').length > 0, { what: 'the rename' });
      await imap.mailboxDelete('Invoices');
      await eventually(() => callsOf('email.folder.delete').length > 0, { what: 'email.folder.delete', timeoutMs: 30_000 });

      // drafts
      await imap.append('Drafts', ['From: alice@example.test', 'To: bob@example.test', 'Subject: draft one', 'Message-ID: <draft-1@example.test>', '', 'draft body', ''].join('\r\n'), ['\\Draft']);
      const draft = await eventually(() => callsOf('email.draft.new')[0], { what: 'email.draft.new', timeoutMs: 30_000 });
      expect(draft.json.data).toMatchObject({ object: 'Draft', subject: 'draft one' });
      await imap.mailboxOpen('Drafts');
      await imap.messageDelete('1:*');
      await eventually(() => callsOf('email.draft.delete').length === 1, { what: 'email.draft.delete', timeoutMs: 30_000 });

      await imap.mailboxOpen('INBOX');
      await imap.messageDelete('1:*');
      await eventually(() => callsOf('email.delete').some((c) => c.json.data.id === emailId), { what: 'email.delete' });
    } finally {
      await imap.logout();
    }

    // a bounce
    const bounce = readFileSync(new URL('../fixtures/bounces/flufl/postfix_01.txt', import.meta.url));
    await mail.deliver({ from: 'MAILER-DAEMON@remote.test', to: alice.email, raw: bounce });
    const bounceCall = await eventually(() => callsOf('email.new.bounce')[0], { what: 'email.new.bounce' });
    expect(bounceCall.json.data.recipient).toMatch(/@/);

    // status changes
    await mail.stopDovecot();
    await eventually(() => callsOf('account.status.disconnected').length === 1, { what: 'account.status.disconnected', timeoutMs: 60_000 });
    await mail.startDovecot();
    await eventually(() => callsOf('account.status.running').length === 1, { what: 'account.status.running', timeoutMs: 90_000 });

    // reconnect, then remove
    const again = await service.api('POST', '/auth/intent', connect({ account_id: accountId }));
    expect(again.status).toBe(200);
    await eventually(() => callsOf('account.reconnect').length === 1, { what: 'account.reconnect' });
    await service.api('DELETE', `/accounts/${accountId}`);
    await eventually(() => callsOf('account.remove').length === 1, { what: 'account.remove' });

    // Once per event id; every call answered 200, so every conversation is delivered.
    const ids = calls.map((c) => c.json.id);
    expect(new Set(ids).size).toBe(ids.length);
    const log = await service.api('GET', `/webhooks/conversations?endpoint_id=${endpoint.id}&limit=250`);
    expect(log.body.data.length).toBe(calls.length);
    expect(log.body.data.every((c: any) => c.status === 'delivered' && c.attempts === 1 && c.last_status_code === 200)).toBe(true);
  });

  it('sends nothing to an endpoint whose trigger_events do not match', async () => {
    const quiet = await service.api('POST', '/webhooks/endpoints', { url: `${subscriberUrl}?quiet=1`, trigger_events: ['tracking.click'] });
    expect(quiet.status).toBe(200);
    const log = await service.api('GET', `/webhooks/conversations?endpoint_id=${quiet.body.id}`);
    expect(log.body.data).toEqual([]);
    expect(calls.some((c) => c.json.endpoint_id === quiet.body.id)).toBe(false);
  });
});
