// A fleet of real gateway processes against one real Worker (`npm start`) and a real Dovecot: 30
// accounts spread over three gateways; a SIGKILL, a new gateway, a SIGTERM, and a second process
// started with a live gateway's id. The lease time is the operator's setting
// GATEWAY_LEASE_TTL_SECONDS, shortened here (the lease rules do not depend on its length).
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import pkg from '../../package.json' with { type: 'json' };
import { startMailServer, type MailServer } from '../mailserver/mailserver.ts';
import { mailboxIntent } from './connect.ts';
import { dumpLogsOnFailure, eventually, startService, type GatewayProcess, type Service } from './service.ts';

const LEASE_TTL_SECONDS = 15;
const USERS = Array.from({ length: 30 }, (_, i) => `fleet${String(i + 1).padStart(2, '0')}`);

let mail: MailServer;
let service: Service;
const accounts = new Map<string, string>(); // account id -> user
const gateways = new Map<string, GatewayProcess>();

function startGateway(id: string, extra: Record<string, string> = {}): GatewayProcess {
  const gateway = service.startGateway(id, { NODE_EXTRA_CA_CERTS: mail.caFile, GATEWAY_LOG_FORMAT: 'json', ...extra });
  gateways.set(id, gateway);
  return gateway;
}

/** Accounts per gateway, as the leases in D1 say (live leases only: the holder heartbeat within a lease time). */
function holders(): Map<string, string[]> {
  const rows = service.query<{ id: string; gateway_id: string | null }>(
    `SELECT a.id, a.gateway_id FROM accounts a JOIN gateways g ON g.id = a.gateway_id
     WHERE g.last_seen_ms > ? AND a.removed_at_ms IS NULL`,
    Date.now() - LEASE_TTL_SECONDS * 1000,
  );
  const out = new Map<string, string[]>();
  for (const row of rows) if (row.gateway_id) out.set(row.gateway_id, [...(out.get(row.gateway_id) ?? []), row.id]);
  return out;
}

const counts = (ids: string[]) => ids.map((id) => holders().get(id)?.length ?? 0);

/** GET /api/v1/gateways, as any key sees it: id -> its entry. */
async function listed(): Promise<
  Map<string, { accounts_held: number; capacity: number; connected: boolean; version: string | null }>
> {
  const res = await service.api('GET', '/gateways');
  expect(res.status).toBe(200);
  return new Map(res.body.data.map((g: { id: string }) => [g.id, g]));
}

/** The API lists exactly `ids`, each with the accounts D1's leases give it. */
async function listsFleet(ids: string[]): Promise<boolean> {
  const fleet = await listed();
  const byGateway = holders();
  return (
    [...fleet.keys()].sort().join() === [...ids].sort().join() &&
    ids.every((id) => fleet.get(id)!.accounts_held === (byGateway.get(id)?.length ?? 0))
  );
}

/** Each live gateway holds within [min, max] and together they hold all 30. */
function spread(ids: string[], min: number, max: number): boolean {
  const byGateway = holders();
  const total = [...byGateway.values()].reduce((n, held) => n + held.length, 0);
  return (
    total === accounts.size &&
    ids.every((id) => {
      const n = byGateway.get(id)?.length ?? 0;
      return n >= min && n <= max;
    })
  );
}

/** The leases a gateway's log says it was granted from `since` on (ms since the epoch). */
function leaseGrants(log: string[], since: number): { account: string; at: number }[] {
  return log
    .filter((line) => line.startsWith('{') && line.includes('"lease granted"'))
    .map((line) => JSON.parse(line) as { time: string; account: string })
    .map((entry) => ({ account: entry.account, at: Date.parse(entry.time) }))
    .filter((grant) => grant.at >= since);
}

/** Delivers a message with `subject` to every account, then waits until each one has it exactly once. */
async function deliverToAll(subject: string, timeoutMs: number): Promise<number> {
  const started = Date.now();
  await Promise.all(
    USERS.map((user) =>
      mail.deliver({
        from: 'sender@remote.test',
        to: mail.users.find((u) => u.user === user)!.email,
        subject,
        text: subject,
      }),
    ),
  );
  await eventually(
    async () => {
      for (const id of accounts.keys()) {
        const found = (await service.listEmails(id)).filter((e) => e.subject === subject);
        if (found.length !== 1) return null;
      }
      return true;
    },
    { what: `"${subject}" in all 30 accounts`, timeoutMs, intervalMs: 1_000 },
  );
  // Exactly once, and it stays that way.
  for (const id of accounts.keys())
    expect((await service.listEmails(id)).filter((e) => e.subject === subject)).toHaveLength(1);
  return Date.now() - started;
}

// The project's hookTimeout (300 s): `npm start` (more so with mail shards) may take minutes on a loaded machine.
beforeAll(async () => {
  mail = await startMailServer({ users: USERS });
  service = await startService({ workerEnv: { GATEWAY_LEASE_TTL_SECONDS: String(LEASE_TTL_SECONDS) } });
  for (const id of ['gw-a', 'gw-b', 'gw-c']) startGateway(id);
  await eventually(
    () => service.query<{ n: number }>('SELECT count(*) AS n FROM gateways WHERE connected = 1')[0]!.n === 3,
    { what: 'three connected gateways', timeoutMs: 60_000, intervalMs: 250 },
  );
});

afterEach((ctx) => dumpLogsOnFailure(ctx, service));

afterAll(async () => {
  await service?.stop();
  await mail?.stop();
});

describe('a fleet of three gateways', () => {
  it('spreads 30 accounts evenly: 7 to 13 each', async () => {
    for (let i = 0; i < USERS.length; i += 3) {
      await Promise.all(
        USERS.slice(i, i + 3).map(async (user) => {
          const res = await service.api('POST', '/auth/intent', mailboxIntent(mail.info(), user));
          expect(res.status, JSON.stringify(res.body)).toBe(200);
          accounts.set(res.body.id, user);
        }),
      );
    }
    await eventually(() => spread(['gw-a', 'gw-b', 'gw-c'], 7, 13), {
      what: 'every gateway holding 7 to 13 accounts',
      timeoutMs: 90_000,
      intervalMs: 500,
    });
    console.log(`spread: ${counts(['gw-a', 'gw-b', 'gw-c']).join(', ')}`);
    // GET /gateways: the three, with the accounts each holds, its capacity, its version.
    await eventually(() => listsFleet(['gw-a', 'gw-b', 'gw-c']), { what: 'GET /gateways listing the three' });
    const fleet = await listed();
    expect([...fleet.values()].reduce((n, g) => n + g.accounts_held, 0)).toBe(30);
    for (const gateway of fleet.values()) {
      expect(gateway).toMatchObject({ capacity: 1000, connected: true, version: pkg.version });
      expect(gateway.accounts_held).toBeGreaterThanOrEqual(7);
    }
    await deliverToAll('before any failure', 60_000);
  }, 240_000);

  it('after a SIGKILL, the others take its accounts once its leases run out: every account syncs, each message once', async () => {
    const killed = service.query<{ id: string }>(
      'SELECT id FROM accounts WHERE gateway_id = ? AND removed_at_ms IS NULL',
      'gw-a',
    );
    expect(killed.length).toBeGreaterThan(0);
    const killedAt = Date.now();
    await gateways.get('gw-a')!.kill('SIGKILL');
    // How long it takes depends on the machine's load; the figure is printed, not asserted.
    const took = await deliverToAll('after a kill', LEASE_TTL_SECONDS * 1000 + 120_000);
    console.log(`after SIGKILL: all 30 synced a new message ${took} ms after the kill`);
    const now = holders();
    for (const { id } of killed) expect(['gw-b', 'gw-c'].some((g) => now.get(g)?.includes(id))).toBe(true);
    // A lease is never taken from a holder that may still be alive: each was granted to another
    // gateway only after the killed one's leases had run out, a lease time after its last heartbeat
    // (read now: whatever reached the Worker after the kill counts).
    const [lastHeartbeat] = service.query<{ last_seen_ms: number }>(
      'SELECT last_seen_ms FROM gateways WHERE id = ?',
      'gw-a',
    );
    const leasesRanOut = lastHeartbeat!.last_seen_ms + LEASE_TTL_SECONDS * 1000;
    expect(leasesRanOut).toBeGreaterThan(killedAt);
    const grants = ['gw-b', 'gw-c'].flatMap((g) => leaseGrants(gateways.get(g)!.log, killedAt));
    for (const { id } of killed) {
      const granted = grants.filter((g) => g.account === id);
      expect(granted.length, id).toBeGreaterThan(0);
      for (const g of granted) expect(g.at, id).toBeGreaterThanOrEqual(leasesRanOut);
    }
  }, 240_000);

  it('a new gateway takes its share from the others, handed over without a storm', async () => {
    startGateway('gw-d');
    await eventually(() => spread(['gw-b', 'gw-c', 'gw-d'], 7, 13), {
      what: 'gw-d taking its share',
      timeoutMs: 90_000,
      intervalMs: 500,
    });
    console.log(`with gw-d: ${counts(['gw-b', 'gw-c', 'gw-d']).join(', ')}`);
    // Handed over, not fought over: no account was refused to the gateway that took it over.
    await deliverToAll('after a new gateway', 60_000);
  }, 180_000);

  it('on SIGTERM, a gateway hands its accounts over at once (within 10 s)', async () => {
    const leaving = holders().get('gw-b') ?? [];
    expect(leaving.length).toBeGreaterThan(0);
    const started = Date.now();
    await gateways.get('gw-b')!.kill('SIGTERM');
    await eventually(
      () => {
        const now = holders();
        return leaving.every((id) => ['gw-c', 'gw-d'].some((g) => now.get(g)?.includes(id)));
      },
      { what: 'gw-b’s accounts held by gw-c and gw-d', timeoutMs: 10_000, intervalMs: 200 },
    );
    console.log(`after SIGTERM: ${leaving.length} accounts moved in ${Date.now() - started} ms`);
    expect(gateways.get('gw-b')!.log.some((l) => l.includes('leases released'))).toBe(true);
    // A stopped gateway leaves the list at once.
    expect([...(await listed()).keys()].sort()).toEqual(['gw-c', 'gw-d']);
    await deliverToAll('after a stop', 60_000);
  }, 120_000);

  it('refuses a second process with a live gateway’s id instead of letting them fight', async () => {
    const before = holders().get('gw-c') ?? [];
    const ownerLog = gateways.get('gw-c')!.log;
    const ownerLines = ownerLog.length;
    const impostor = service.startGateway('gw-c', { NODE_EXTRA_CA_CERTS: mail.caFile });
    await eventually(() => impostor.log.some((l) => l.includes('another live gateway uses this GATEWAY_ID')), {
      what: 'the second gw-c refused',
      timeoutMs: 30_000,
      intervalMs: 250,
    });
    // Give it a few of its retries' worth of time to do harm, then check it did none.
    await new Promise((r) => setTimeout(r, 3_000));
    expect(impostor.log.some((l) => l.includes('lease granted'))).toBe(false);
    const after = holders().get('gw-c') ?? [];
    expect(new Set(after)).toEqual(new Set(before));
    expect(ownerLog.slice(ownerLines).some((l) => l.includes('control socket') && !l.includes('open'))).toBe(false);
    await impostor.kill('SIGTERM');
    // The owner is untouched by the impostor's stop, and still syncs all of its accounts.
    expect(new Set(holders().get('gw-c') ?? [])).toEqual(new Set(before));
    await deliverToAll('after an impostor', 60_000);
  }, 120_000);
});
