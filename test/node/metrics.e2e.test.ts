// The operator's view of a real gateway (GATEWAY_HTTP_PORT) against `npm start` and a real Dovecot:
// /metrics parsed as Prometheus text, its counters moving with real events (new mail, a refused
// password), /healthz following the way to the Worker (cut and restored by a relay in between), and
// the gateway's log lines as JSON objects that never carry a password or the gateway secret.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startMailServer, type MailServer } from '../mailserver/mailserver.ts';
import { connectMailbox, mailboxIntent } from './connect.ts';
import { freePort } from './helpers.ts';
import { healthz, type Relay, scrape, startRelay } from './operator.ts';
import { dumpLogsOnFailure, eventually, startService, type GatewayProcess, type Service } from './service.ts';

/** Short leases, so that a Worker out of reach shows within seconds (a heartbeat every 2 s). */
const LEASE_TTL_SECONDS = 6;

let mail: MailServer;
let service: Service;
let relay: Relay;
let gateway: GatewayProcess;
let http: string;
let accountId: string;

beforeAll(async () => {
  mail = await startMailServer({ users: ['alice', 'bob'] });
  service = await startService({ workerEnv: { GATEWAY_LEASE_TTL_SECONDS: String(LEASE_TTL_SECONDS) } });
  relay = await startRelay(Number(new URL(service.base).port));
  const port = await freePort();
  http = `http://127.0.0.1:${port}`;
  gateway = service.startGateway('gw-metrics', {
    NODE_EXTRA_CA_CERTS: mail.caFile,
    WORKER_URL: `http://127.0.0.1:${relay.port}`,
    GATEWAY_HTTP_PORT: String(port),
  });
  await eventually(async () => (await healthz(http)).status === 200, { what: '/healthz 200', timeoutMs: 60_000 });
  accountId = (await connectMailbox(service, mail, 'alice')).id;
}, 240_000);

afterEach((ctx) => dumpLogsOnFailure(ctx, service));

afterAll(async () => {
  await service?.stop();
  await relay?.close();
  await mail?.stop();
});

describe('a gateway with GATEWAY_HTTP_PORT', () => {
  it('serves /healthz: its id, the accounts it holds, its connections, the heartbeat age', async () => {
    const health = await eventually(
      async () => {
        const answer = await healthz(http);
        return answer.body.accounts === 1 ? answer : null;
      },
      { what: '/healthz with the account held' },
    );
    expect(health.status).toBe(200);
    expect(health.body).toMatchObject({ status: 'ok', gateway_id: 'gw-metrics', accounts: 1 });
    expect(health.body.imap_connections).toBeGreaterThanOrEqual(1);
    expect(health.body.heartbeat_age_seconds).toBeLessThan(LEASE_TTL_SECONDS);
  });

  it('serves /metrics as Prometheus text with the gateway series and the default process metrics', async () => {
    const metrics = await scrape(http);
    expect(metrics.contentType).toMatch(/^text\/plain; version=0\.0\.4/);
    for (const [name, type] of [
      ['mailbox_gateway_accounts', 'gauge'],
      ['mailbox_gateway_imap_connections', 'gauge'],
      ['mailbox_gateway_changes_relayed_total', 'counter'],
      ['mailbox_gateway_relay_seconds', 'histogram'],
      ['mailbox_gateway_errors_total', 'counter'],
      ['mailbox_gateway_sends_total', 'counter'],
      ['mailbox_gateway_heartbeat_age_seconds', 'gauge'],
      ['process_resident_memory_bytes', 'gauge'],
      ['nodejs_heap_size_used_bytes', 'gauge'],
    ])
      expect(metrics.types.get(name!), name).toBe(type);
    expect(metrics.value('mailbox_gateway_accounts')).toBe(1);
    expect(metrics.value('mailbox_gateway_imap_connections')).toBeGreaterThanOrEqual(1);
    for (const kind of ['auth', 'network', 'tls', 'protocol', 'worker'])
      expect(metrics.samples.some((s) => s.name === 'mailbox_gateway_errors_total' && s.labels.class === kind)).toBe(
        true,
      );
    // No label names an account or an address.
    const labelValues = metrics.samples.flatMap((s) => Object.values(s.labels));
    expect(labelValues.filter((v) => v.includes('@') || v.includes(accountId))).toEqual([]);
  });

  it('counts relayed changes when mail arrives, and the time from the notification to the Worker', async () => {
    const before = await scrape(http);
    const messages = before.value('mailbox_gateway_changes_relayed_total', { kind: 'messages' });
    const relays = before.value('mailbox_gateway_relay_seconds_count');
    await mail.deliver({ from: 'ann@remote.test', to: 'alice@example.test', subject: 'counted', text: 'hello' });
    const after = await eventually(
      async () => {
        const now = await scrape(http);
        return now.value('mailbox_gateway_changes_relayed_total', { kind: 'messages' }) > messages &&
          now.value('mailbox_gateway_relay_seconds_count') > relays
          ? now
          : null;
      },
      {
        what: 'changes_relayed_total{kind="messages"} and relay_seconds_count rising',
        timeoutMs: 60_000,
        intervalMs: 250,
      },
    );
    expect(after.value('mailbox_gateway_changes_relayed_total', { kind: 'messages' })).toBe(messages + 1);
    expect((await service.listEmails(accountId)).some((e) => e.subject === 'counted')).toBe(true);
  });

  it('counts a refused password as errors_total{class="auth"}', async () => {
    const before = (await scrape(http)).value('mailbox_gateway_errors_total', { class: 'auth' });
    const res = await service.api(
      'POST',
      '/auth/intent',
      mailboxIntent(mail.info(), 'bob', { password: 'not-her-password-7f3a' }),
    );
    expect(res.status).toBe(401);
    const after = (await scrape(http)).value('mailbox_gateway_errors_total', { class: 'auth' });
    expect(after).toBeGreaterThan(before);
  });

  it('answers /healthz 503 while the Worker is out of reach, and 200 once it is back', async () => {
    await relay.cut();
    const down = await eventually(
      async () => {
        const answer = await healthz(http);
        return answer.status === 503 ? answer : null;
      },
      { what: '/healthz 503', timeoutMs: 30_000, intervalMs: 250 },
    );
    expect(down.body).toMatchObject({ status: 'worker_unreachable', gateway_id: 'gw-metrics' });
    expect((await scrape(http)).value('mailbox_gateway_errors_total', { class: 'worker' })).toBeGreaterThan(0);
    await relay.restore();
    await eventually(async () => (await healthz(http)).status === 200, {
      what: '/healthz 200 again',
      timeoutMs: 60_000,
      intervalMs: 250,
    });
  });

  it('logs one JSON object a line with time, level, gateway and account, and never a password or the secret', () => {
    const lines = gateway.log.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines.length).toBeGreaterThan(5);
    for (const line of lines) {
      expect(Date.parse(String(line.time))).not.toBeNaN();
      expect(['debug', 'info', 'warn', 'error']).toContain(line.level);
      expect(typeof line.msg).toBe('string');
      expect(line.gateway).toBe('gw-metrics');
    }
    expect(lines.some((line) => line.msg === 'lease granted' && line.account === accountId)).toBe(true);
    const text = gateway.log.join('\n');
    for (const secret of [service.gatewaySecret, 'alice-password', 'bob-password', 'not-her-password-7f3a'])
      expect(text).not.toContain(secret);
  });
});
