// The account object and the gateway holding it: a message that fails and storage hiccups, changes
// refused without the lease, status changes, removing an account, and the gateway's signed endpoints
// (heartbeat, lease, changes) with the mailbox password never stored in plain text.
import { runDurableObjectAlarm, runInDurableObject } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import type { AccountObject } from '../../worker/durable/account-object.ts';
import { isTransient } from '../../worker/sync/run-changes.ts';
import { api, expectError } from './helpers.ts';
import { createSyncedAccount, gatewayCall, leased, list, messageIn, outbox, rawMessage } from './sync-helpers.ts';

describe('applying changes', () => {
  it('records a message that fails, and forgets the failure once it goes through', async () => {
    const account = await leased();
    const raw = rawMessage({ subject: 'staged late' });
    const bytes = new TextEncoder().encode(raw);
    const sha = [...new Uint8Array(await crypto.subtle.digest('SHA-256', bytes))]
      .map((b) => b.toString(16).padStart(2, '0'))
      .join('');
    const change = {
      type: 'messages' as const,
      path: 'INBOX',
      uidvalidity: 1,
      messages: [{ ...messageIn(1, raw), raw: '', staged: sha }],
    };
    const failures = () =>
      runInDurableObject(account.stub, (_instance, state) =>
        state.storage.sql.exec('SELECT uid, attempts FROM failed_messages').toArray(),
      );
    // Its staged source is not in R2 yet: the change fails and the failure is counted.
    // (Called inside the object: a rejection across RPC would be reported as uncaught.)
    await expect(
      runInDurableObject(account.stub, (instance: AccountObject) => instance.applyChanges(account.gateway, [change])),
    ).rejects.toThrow(/staged source/);
    expect(await failures()).toEqual([{ uid: 1, attempts: 1 }]);
    await env.BLOBS.put(`accounts/${account.id}/staged/${sha}.eml`, bytes);
    await account.stub.applyChanges(account.gateway, [change]);
    expect((await list(`account_id=${account.id}`)).data.map((e: any) => e.subject)).toEqual(['staged late']);
    expect(await failures()).toEqual([]);
  });

  it('tells storage hiccups, retried without counting, from failures the message causes', () => {
    expect(isTransient(new Error('D1_ERROR: Network connection lost.'))).toBe(true);
    expect(isTransient(new Error('D1 DB is overloaded. Requests queued for too long.'))).toBe(true);
    expect(isTransient(new Error('get: We encountered an internal error. Please try again.'))).toBe(true);
    expect(isTransient(new Error('D1_ERROR: string or blob too big: SQLITE_TOOBIG'))).toBe(false);
    expect(isTransient(new Error('D1_ERROR: UNIQUE constraint failed: SQLITE_CONSTRAINT'))).toBe(false);
    expect(isTransient(new Error('the staged source 00ff is missing'))).toBe(false);
    expect(isTransient(new TypeError("Cannot read properties of undefined (reading 'from')"))).toBe(false);
  });

  it('refuses changes from a gateway that does not hold the lease', async () => {
    const account = await leased('gw-1');
    const refused = await account.stub.applyChanges('gw-2', [
      { type: 'cursor', path: 'INBOX', uidvalidity: 1, last_uid: 1, highest_modseq: null },
    ]);
    expect(refused).toEqual({ ok: false, lease_lost: 'the account is held by gw-1' });
    expect((await account.stub.acquireLease('gw-2')).granted).toBe(false);
  });

  it('records status changes once, with their events', async () => {
    const account = await leased();
    await account.stub.reportStatus(account.gateway, 'disconnected', 'connection refused');
    await account.stub.reportStatus(account.gateway, 'disconnected', 'connection refused');
    await account.stub.reportStatus(account.gateway, 'running', null);
    expect((await outbox(account.id)).map((e) => e.type)).toEqual([
      'account.status.disconnected',
      'account.status.running',
    ]);
    expect((await api('GET', `/accounts/${account.id}`)).body).toMatchObject({ status: 'running', last_error: null });
  });

  it('removes an account with all its emails, folders and blobs, touching nothing else', async () => {
    const keep = await leased();
    const gone = await leased();
    for (const a of [keep, gone]) {
      await a.stub.applyChanges(a.gateway, [
        {
          type: 'messages',
          path: 'INBOX',
          uidvalidity: 1,
          messages: [messageIn(1, rawMessage({ attachment: { name: 'a.txt', type: 'text/plain', content: 'x' } }))],
        },
      ]);
    }
    const res = await api('DELETE', `/accounts/${gone.id}`);
    expect(res.body).toEqual({ object: 'AccountDeleted', id: gone.id });
    expect((await list(`account_id=${gone.id}`)).data).toEqual([]);
    expect((await api('GET', `/folders?account_id=${gone.id}`)).body.data).toEqual([]);
    expectError(await api('GET', `/accounts/${gone.id}`), 404, 'not_found');
    // The purge runs in the object's alarms, a bounded step each.
    while (await runDurableObjectAlarm(gone.stub));
    expect((await env.BLOBS.list({ prefix: `accounts/${gone.id}/` })).objects).toEqual([]);
    // The source and the attachment of the kept email: byte ranges of its change's one segment.
    expect((await env.BLOBS.list({ prefix: `accounts/${keep.id}/` })).objects.map((o) => o.key)).toEqual([
      expect.stringMatching(/\/segments\/[0-9a-f]{40}\.bin$/),
    ]);
    expect((await list(`account_id=${keep.id}`)).data).toHaveLength(1);
    const removed = await env.DB.prepare("SELECT type FROM events WHERE account_id = ? AND type = 'account.remove'")
      .bind(gone.id)
      .all();
    expect(removed.results).toHaveLength(1);
    expect((await gone.stub.acquireLease('gw-9')).granted).toBe(false);
  });
});

describe('the gateway endpoints', () => {
  it('refuse unsigned, wrongly signed or stale calls', async () => {
    expect(
      (
        await gatewayCall(
          '/internal/gateway/heartbeat',
          { gateway_id: 'gw', instance: 'proc-gw', held: [], capacity: 100 },
          'wrong-secret',
        )
      ).status,
    ).toBe(401);
    const unsigned = await (await import('cloudflare:workers')).exports.default.fetch(
      'https://mail.example.com/internal/gateway/heartbeat',
      {
        method: 'POST',
        body: JSON.stringify({ gateway_id: 'gw', held: [] }),
      },
    );
    expect(unsigned.status).toBe(401);
    // An API key is no way in.
    const withKey = await (await import('cloudflare:workers')).exports.default.fetch(
      'https://mail.example.com/internal/gateway/heartbeat',
      {
        method: 'POST',
        headers: { 'X-API-KEY': 'test-admin-key' },
        body: JSON.stringify({ gateway_id: 'gw', held: [] }),
      },
    );
    expect(withKey.status).toBe(401);
  });

  it('lease an account with its decrypted settings and cursors, and apply changes', async () => {
    const account = await createSyncedAccount();
    const heartbeat = await gatewayCall('/internal/gateway/heartbeat', {
      gateway_id: 'gw-http',
      instance: 'proc-gw-http',
      held: [],
      capacity: 100,
    });
    expect(heartbeat.status).toBe(200);
    expect(heartbeat.body.claimable).toContain(account.id);

    const lease = await gatewayCall(`/internal/gateway/accounts/${account.id}/lease`, {
      gateway_id: 'gw-http',
      instance: 'proc-gw-http',
    });
    expect(lease.body).toMatchObject({ granted: true, account_id: account.id });
    expect(lease.body.config.imap).toMatchObject({ host: '127.0.0.1', password: 'secret-imap', user: account.email });
    expect(lease.body.cursors.map((c: any) => c.path)).toContain('INBOX');
    expect(
      (
        await gatewayCall(`/internal/gateway/accounts/${account.id}/lease`, {
          gateway_id: 'other',
          instance: 'proc-other',
        })
      ).body,
    ).toEqual({ granted: false, holder: 'gw-http' });

    const applied = await gatewayCall(`/internal/gateway/accounts/${account.id}/changes`, {
      gateway_id: 'gw-http',
      changes: [
        {
          type: 'messages',
          path: 'INBOX',
          uidvalidity: 1,
          messages: [messageIn(1, rawMessage({ subject: 'over http' }))],
        },
      ],
    });
    expect(applied.status).toBe(200);
    expect(applied.body.cursors.find((c: any) => c.path === 'INBOX').last_uid).toBe(1);
    const lost = await gatewayCall(`/internal/gateway/accounts/${account.id}/changes`, {
      gateway_id: 'other',
      changes: [{ type: 'cursor', path: 'INBOX', uidvalidity: 1, last_uid: 1, highest_modseq: null }],
    });
    expect(lost.status).toBe(409);
    expect(lost.body.type).toBe('errors/lease_lost');

    const again = await gatewayCall('/internal/gateway/heartbeat', {
      gateway_id: 'gw-http',
      instance: 'proc-gw-http',
      held: [account.id],
      capacity: 100,
    });
    expect(again.body.lost).toEqual([]);
    expect(again.body.claimable).not.toContain(account.id);
    expect(
      (
        await gatewayCall('/internal/gateway/heartbeat', {
          gateway_id: 'intruder',
          instance: 'proc-intruder',
          held: [account.id],
          capacity: 100,
        })
      ).body.lost,
    ).toEqual([account.id]);
    // The holder restarted and forgot: it gets its account back at once, nobody else does.
    expect(
      (
        await gatewayCall('/internal/gateway/heartbeat', {
          gateway_id: 'gw-http',
          instance: 'proc-gw-http',
          held: [],
          capacity: 100,
        })
      ).body.claimable,
    ).toContain(account.id);
    expect(
      (
        await gatewayCall('/internal/gateway/heartbeat', {
          gateway_id: 'other',
          instance: 'proc-other',
          held: [],
          capacity: 100,
        })
      ).body.claimable,
    ).not.toContain(account.id);
  });

  it('stores no mailbox password in plain text', async () => {
    const account = await createSyncedAccount();
    const row = await env.DB.prepare('SELECT * FROM accounts WHERE id = ?').bind(account.id).first();
    const dump = JSON.stringify(row);
    expect(dump).not.toContain('secret-imap');
    expect(dump).not.toContain('secret-smtp');
    // Sealed with AES-GCM under a named key: v2.<key id>.<iv>.<ciphertext>.
    expect(String(row?.credentials)).toMatch(/^v2\.[0-9a-f]{8}\./);
  });
});
