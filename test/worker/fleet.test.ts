// The fleet of gateways, as the Worker runs it: a heartbeat's cost with 1,000 accounts (counted
// against Cloudflare's per-invocation limits), shares and hand-over, leases that only the account's
// object can move, released leases, and one live process per gateway id.
import { env, exports } from 'cloudflare:workers';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { GATEWAY_SIGNATURE_HEADER, signRequest } from '../../common/signing.ts';
import { shares } from '../../worker/gateways/fleet.ts';
import { invocation, LIMITS, meteredEnv, newMeter } from './metered.ts';
import { createSyncedAccount, GATEWAY_SECRET, gatewayCall, gatewayCallWith } from './sync-helpers.ts';

const heartbeat = (gateway: string, held: string[], capacity = 1000, instance = `proc-${gateway}`) =>
  gatewayCall('/internal/gateway/heartbeat', { gateway_id: gateway, instance, held, capacity });

/** `count` accounts straight into D1 (one statement), held by `holder` (live while it heartbeats), or by nobody. */
async function bulkAccounts(prefix: string, count: number, holder: string | null): Promise<string[]> {
  const now = new Date().toISOString();
  await env.DB.prepare(
    `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
     INSERT INTO accounts (id, email, user_id, imap_host, imap_port, imap_encryption, smtp_host, smtp_port, smtp_encryption,
       smtp_user, credentials, created_at, connected_at, updated_at, gateway_id)
     SELECT ?2 || printf('%05d', i), 'u' || i || '@' || ?2 || '.test', 'u' || i, '127.0.0.1', 993, 'SSL', '127.0.0.1', 465, 'SSL',
       'u' || i, 'x', ?3, ?3, ?3, ?4 FROM n`,
  )
    .bind(count, prefix, now, holder)
    .run();
  return Array.from({ length: count }, (_, i) => `${prefix}${String(i + 1).padStart(5, '0')}`);
}

// The tests of a file share one database: each starts with no gateway and no account to share out.
beforeEach(async () => {
  await env.DB.batch([
    env.DB.prepare('DELETE FROM gateways'),
    env.DB.prepare('UPDATE accounts SET removed_at_ms = 1 WHERE removed_at_ms IS NULL'),
  ]);
});

describe('a heartbeat', () => {
  it('of a gateway holding 1,000 accounts stays within one invocation’s limits, writes no account row, and finds the one it lost', async () => {
    const ids = await bulkAccounts('acc_big', 1000, 'gw-big');
    expect((await heartbeat('gw-big', [])).status).toBe(200);
    // One account moved to another gateway meanwhile.
    await env.DB.prepare("UPDATE accounts SET gateway_id = 'gw-other' WHERE id = ?").bind(ids[500]).run();
    // Every write to an account row from now on is counted (by D1 itself, whoever writes it).
    await env.DB.batch([
      env.DB.prepare('CREATE TABLE account_writes (n INTEGER NOT NULL)'),
      env.DB.prepare('INSERT INTO account_writes (n) VALUES (0)'),
      env.DB.prepare(
        'CREATE TRIGGER account_written AFTER UPDATE ON accounts BEGIN UPDATE account_writes SET n = n + 1; END',
      ),
    ]);
    const meter = newMeter();
    const res = await invocation(meter, () =>
      gatewayCallWith(meteredEnv(env, meter), '/internal/gateway/heartbeat', {
        gateway_id: 'gw-big',
        instance: 'proc-gw-big',
        held: ids,
        capacity: 1000,
      }),
    );
    const writes = await env.DB.prepare('SELECT n FROM account_writes').first<{ n: number }>();
    await env.DB.batch([env.DB.prepare('DROP TRIGGER account_written'), env.DB.prepare('DROP TABLE account_writes')]);
    expect(res.status).toBe(200);
    expect(res.body.lost).toEqual([ids[500]]);
    expect(res.body.release).toEqual([]);
    // The gateway's own row keeps its 999 leases: no account's row is written for it.
    expect(writes!.n).toBe(0);
    console.log(`heartbeat of 1,000 accounts: ${meter.max.d1} D1 queries, ${meter.max.subrequests} subrequests`);
    expect(meter.max.d1).toBeLessThanOrEqual(12);
    expect(meter.max.subrequests).toBeLessThanOrEqual(0);
    expect(meter.max.d1).toBeLessThanOrEqual(LIMITS.d1);
  });
});

describe('shares', () => {
  it('split the accounts evenly, never past a gateway’s capacity', () => {
    const even = shares(30, [
      { id: 'a', capacity: 1000 },
      { id: 'b', capacity: 1000 },
      { id: 'c', capacity: 1000 },
    ]);
    expect([...even.values()]).toEqual([10, 10, 10]);
    const capped = shares(30, [
      { id: 'a', capacity: 4 },
      { id: 'b', capacity: 1000 },
      { id: 'c', capacity: 1000 },
    ]);
    expect(Object.fromEntries(capped)).toEqual({ a: 4, b: 13, c: 13 });
  });

  it('never offer a gateway more than its capacity; the others take the rest', async () => {
    await bulkAccounts('acc_cap', 30, null);
    await heartbeat('gw-small', [], 4);
    await heartbeat('gw-large', [], 1000);
    expect((await heartbeat('gw-small', [], 4)).body.claimable).toHaveLength(4);
    expect((await heartbeat('gw-large', [], 1000)).body.claimable).toHaveLength(26);
  });

  it('offer gateways that ask together different accounts, and ask a gateway over its share to hand some over', async () => {
    const ids = await bulkAccounts('acc_split', 30, null);
    for (const g of ['gw-a', 'gw-b', 'gw-c']) await heartbeat(g, []);
    const offers = await Promise.all(['gw-a', 'gw-b', 'gw-c'].map(async (g) => (await heartbeat(g, [])).body));
    for (const offer of offers) expect(offer.claimable).toHaveLength(10);
    expect(new Set(offers.flatMap((o) => o.claimable)).size).toBe(30);

    // gw-a took all 30 (it was alone then): it is asked to hand 20 over, at most 20 at a time.
    await env.DB.prepare('UPDATE accounts SET gateway_id = ? WHERE id IN (SELECT value FROM json_each(?))')
      .bind('gw-a', JSON.stringify(ids))
      .run();
    const busy = (await heartbeat('gw-a', ids)).body;
    expect(busy.release).toHaveLength(20);
    expect(busy.claimable).toEqual([]);
    const handedOver = await gatewayCall('/internal/gateway/release', {
      gateway_id: 'gw-a',
      instance: 'proc-gw-a',
      accounts: busy.release,
      stopping: false,
    });
    expect(handedOver.status).toBe(200);
    const takers = await Promise.all(['gw-b', 'gw-c'].map(async (g) => (await heartbeat(g, [])).body.claimable));
    expect(takers.map((t) => t.length)).toEqual([10, 10]);
    expect(new Set(takers.flat())).toEqual(new Set(busy.release));
  });
});

describe('accounts D1 names for a gateway that does not list them', () => {
  it('are offered back to it even at a full share, and let go of past its capacity', async () => {
    // gw-full holds its whole share (10 of 20, with gw-other), and D1 also names two accounts for
    // it that it does not list: a claim whose answer it never got.
    const listed = await bulkAccounts('acc_full', 10, 'gw-full');
    const unlisted = await bulkAccounts('acc_lost', 2, 'gw-full');
    await bulkAccounts('acc_rest', 8, 'gw-other');
    await heartbeat('gw-other', []);
    const full = (await heartbeat('gw-full', listed)).body;
    expect(full.release).toEqual([]);
    expect(full.claimable).toEqual(unlisted);

    // Back with room for only 11: the twelfth is let go, for the others to take.
    const small = (await heartbeat('gw-full', listed, 11)).body;
    expect(small.claimable).toEqual([unlisted[0]]);
    const row = await env.DB.prepare('SELECT gateway_id FROM accounts WHERE id = ?')
      .bind(unlisted[1])
      .first<{ gateway_id: string | null }>();
    expect(row!.gateway_id).toBeNull();
    expect((await heartbeat('gw-other', [])).body.claimable).toContain(unlisted[1]);
  });
});

describe('leases', () => {
  it('move only through the account’s object, which refuses the old holder from then on', async () => {
    const account = await createSyncedAccount();
    await heartbeat('gw-1', []);
    await heartbeat('gw-2', []);
    const lease = (gateway: string) =>
      gatewayCall(`/internal/gateway/accounts/${account.id}/lease`, {
        gateway_id: gateway,
        instance: `proc-${gateway}`,
      });
    // A lease costs two calls to the account's object (the grant, then cursors, initial sync and orphans
    // together), whatever the fleet's size.
    const meter = newMeter();
    const granted = await invocation(meter, () =>
      gatewayCallWith(meteredEnv(env, meter), `/internal/gateway/accounts/${account.id}/lease`, {
        gateway_id: 'gw-1',
        instance: 'proc-gw-1',
      }),
    );
    expect(granted.body.granted).toBe(true);
    expect(meter.max.subrequests).toBe(2);
    expect((await lease('gw-2')).body).toEqual({ granted: false, holder: 'gw-1' });
    // gw-1's heartbeats keep it; the lease stays gw-1's, to the last moment of its lease time.
    expect((await heartbeat('gw-1', [account.id])).body.lost).toEqual([]);
    expect((await lease('gw-2')).body.granted).toBe(false);
    await env.DB.prepare('UPDATE gateways SET last_seen_ms = ? WHERE id = ?')
      .bind(Date.now() - 50_000, 'gw-1')
      .run();
    expect((await lease('gw-2')).body.granted).toBe(false);

    // gw-1 falls silent and its heartbeat runs out: gw-2 gets the account, and gw-1 is refused.
    await env.DB.prepare('UPDATE gateways SET last_seen_ms = ? WHERE id = ?')
      .bind(Date.now() - 60_001, 'gw-1')
      .run();
    expect((await lease('gw-2')).body.granted).toBe(true);
    const change = { type: 'cursor', path: 'INBOX', uidvalidity: 1, last_uid: 0, highest_modseq: null } as const;
    expect(await account.stub.applyChanges('gw-1', [change])).toEqual({
      ok: false,
      lease_lost: 'the account is held by gw-2',
    });
    expect((await account.stub.applyChanges('gw-2', [change])).ok).toBe(true);
    expect((await heartbeat('gw-1', [account.id])).body.lost).toEqual([account.id]);
  });

  it('given up by a stopping gateway are taken at once, and the stopped gateway leaves the shares', async () => {
    const ids = await bulkAccounts('acc_stop', 4, 'gw-stop');
    await heartbeat('gw-stop', ids);
    await heartbeat('gw-stay', []);
    expect((await heartbeat('gw-stay', [])).body.claimable).toEqual([]);
    const released = await gatewayCall('/internal/gateway/release', {
      gateway_id: 'gw-stop',
      instance: 'proc-gw-stop',
      accounts: ids,
      stopping: true,
    });
    expect(released.status).toBe(200);
    expect(new Set((await heartbeat('gw-stay', [])).body.claimable)).toEqual(new Set(ids));
  });

  it('of a silent gateway are offered to the others once its heartbeat ran out, not before', async () => {
    const ids = await bulkAccounts('acc_silent', 4, 'gw-silent');
    await heartbeat('gw-silent', ids);
    await heartbeat('gw-alive', []);
    const silentFor = (ms: number) =>
      env.DB.prepare('UPDATE gateways SET last_seen_ms = ? WHERE id = ?')
        .bind(Date.now() - ms, 'gw-silent')
        .run();
    // Within the lease time (60 s) its accounts are its own: gw-alive is offered none of them.
    await silentFor(50_000);
    expect((await heartbeat('gw-alive', [])).body.claimable).toEqual([]);
    await silentFor(60_001);
    expect(new Set((await heartbeat('gw-alive', [])).body.claimable)).toEqual(new Set(ids));
  });
});

/** Opens a gateway's control socket as `instance`; the status when it is refused. */
async function connect(gatewayId: string, instance: string) {
  const path = `/internal/gateway/connect?gateway_id=${gatewayId}&instance=${instance}`;
  const signature = await signRequest(GATEWAY_SECRET, { method: 'GET', path, body: '' });
  const response = await exports.default.fetch(`https://mail.example.com${path}`, {
    headers: { Upgrade: 'websocket', [GATEWAY_SIGNATURE_HEADER]: signature },
  });
  response.webSocket?.accept();
  return { status: response.status, ws: response.webSocket };
}

describe('a gateway id', () => {
  it('belongs to one live process: another is refused, not let in to evict it', async () => {
    const owner = await connect('gw-dup', 'first');
    expect(owner.status).toBe(101);
    expect((await heartbeat('gw-dup', [], 10, 'first')).status).toBe(200);
    const second = await heartbeat('gw-dup', [], 10, 'second');
    expect(second.status).toBe(409);
    expect(second.body.type).toBe('errors/gateway_id_in_use');
    expect((await connect('gw-dup', 'second')).status).toBe(409);
    const release = { gateway_id: 'gw-dup', instance: 'second', accounts: [], stopping: true };
    expect((await gatewayCall('/internal/gateway/release', release)).status).toBe(409);
    expect(owner.ws!.readyState).toBe(WebSocket.OPEN);
    // The owner's socket goes (it was killed): a restart with the same id takes the id over at once.
    owner.ws!.close(1000, 'killed');
    await vi.waitFor(async () => expect((await heartbeat('gw-dup', [], 10, 'second')).status).toBe(200));
    // Now the first one is the stranger.
    const restarted = await connect('gw-dup', 'second');
    expect(restarted.status).toBe(101);
    expect((await heartbeat('gw-dup', [], 10, 'first')).status).toBe(409);
    restarted.ws!.close(1000, 'done');
  });

  it('of an owner that stopped is free at once', async () => {
    await connect('gw-stopped', 'first');
    await gatewayCall('/internal/gateway/release', {
      gateway_id: 'gw-stopped',
      instance: 'first',
      accounts: [],
      stopping: true,
    });
    expect((await heartbeat('gw-stopped', [], 10, 'second')).status).toBe(200);
  });
});
