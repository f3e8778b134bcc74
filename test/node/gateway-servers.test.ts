/**
 * The gateway against servers without some extensions (QRESYNC and CONDSTORE: snapshots and full
 * flag fetches; MOVE: another client's COPY then EXPUNGE) and new mail while a poll holds the IDLE
 * connection, with the rig of ./gateway-rig.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ImapFlow } from 'imapflow';
import { listFolders } from '../../gateway/imap.ts';
import { verifyMailbox } from '../../gateway/verify.ts';
import { startMailServer, type MailServer } from '../mailserver/mailserver.ts';
import { openImap } from '../mailserver/client.ts';
import { baselineCursors } from './fake-worker.ts';
import { imapProxy, type ImapProxy } from './imap-proxy.ts';
import {
  configFor,
  deliverTo,
  type GatewayProcess,
  mail,
  messagesOf,
  startGateway,
  useGatewayRig,
  waitForMessage,
  waitForStatus,
  waitForVanished,
  worker,
} from './gateway-rig.ts';

useGatewayRig();

describe('sync without QRESYNC and CONDSTORE (snapshots, full flag fetches)', () => {
  const ACC = 'acc_carol_basic';
  let other: ImapFlow;

  beforeAll(async () => {
    const { folders } = await verifyMailbox(configFor('carol'));
    worker.addAccount(ACC, configFor('carol'), baselineCursors(folders), { onlyGateway: 'gw-basic' });
    other = await openImap(mail, 'carol');
    startGateway({ GATEWAY_ID: 'gw-basic', GATEWAY_IMAP_QRESYNC: '0', GATEWAY_IMAP_CONDSTORE: '0' });
    await waitForStatus(ACC, 'running');
  });

  afterAll(async () => {
    await other?.logout().catch(() => undefined);
  });

  it('relays new mail, flag changes, moves (copy first) and expunges', async () => {
    await deliverTo('carol', 'basic 1');
    await deliverTo('carol', 'basic 2');
    const first = await waitForMessage(ACC, 'basic 1');
    const second = await waitForMessage(ACC, 'basic 2');

    await other.mailboxOpen('INBOX');
    await other.messageFlagsAdd(String(first.uid), ['\\Flagged'], { uid: true });
    const flagged = await worker.waitFor(
      () =>
        worker
          .changesOf(ACC, 'flags')
          .flatMap((c) => c.change.updates)
          .find((u) => u.uid === first.uid && u.flags.includes('\\Flagged')),
      10_000,
      'flags change',
    );
    expect(flagged.flags).toEqual(['\\Flagged']);

    const snapshotWithout = (uid: number, after: number) =>
      worker.waitFor(
        () =>
          worker
            .changesOf(ACC, 'snapshot')
            .find(
              (c) => worker.changes.indexOf(c) >= after && c.change.path === 'INBOX' && !c.change.uids.includes(uid),
            ),
        10_000,
        `snapshot without ${uid}`,
      );
    let mark = worker.changes.length;
    await other.messageMove(String(first.uid), 'Archive', { uid: true });
    const afterMove = await snapshotWithout(first.uid, mark);
    const copy = messagesOf(ACC, 'Archive').find((m) => m.subject === 'basic 1');
    expect(copy, 'Archive copy reported').toBeDefined();
    expect(worker.changes.indexOf(copy!.record)).toBeLessThan(worker.changes.indexOf(afterMove));
    expect(afterMove.change.uids).toContain(second.uid);

    await other.mailboxOpen('INBOX');
    mark = worker.changes.length;
    await other.messageDelete(String(second.uid), { uid: true });
    await snapshotWithout(second.uid, mark);
    expect(worker.changesOf(ACC, 'vanished')).toEqual([]);
  });
});

describe('a server without MOVE (another client moves with COPY, then EXPUNGE)', () => {
  const ACC = 'acc_alice_nomove';
  /** Longer than the pause below, which holds several polls: the gateway waits this long for an expunge. */
  const SETTLE_MS = 5_000;
  let noMove: MailServer;
  let other: ImapFlow;

  beforeAll(async () => {
    noMove = await startMailServer({ users: ['alice'], withoutCapabilities: ['MOVE'] });
    other = await openImap(noMove, 'alice');
    // The folders as the gateway lists them (verify here would need this server's CA in this process).
    const folders = await listFolders(other);
    worker.addAccount(ACC, configFor('alice', undefined, noMove), baselineCursors(folders), {
      onlyGateway: 'gw-nomove',
    });
    startGateway({
      GATEWAY_ID: 'gw-nomove',
      NODE_EXTRA_CA_CERTS: noMove.caFile,
      GATEWAY_MOVE_SETTLE_MS: String(SETTLE_MS),
    });
    await waitForStatus(ACC, 'running');
  }, 60_000);

  afterAll(async () => {
    await other?.logout().catch(() => undefined);
    await noMove?.stop();
  });

  it('relays the copy together with the expunge to come, even when polls ran between the two', async () => {
    await other.append('INBOX', `Subject: moved slowly\r\nMessage-ID: <slow-move@remote.test>\r\n\r\nbody\r\n`);
    const original = await waitForMessage(ACC, 'moved slowly');
    expect(original.path).toBe('INBOX');
    await other.mailboxOpen('INBOX');
    await other.messageCopy(String(original.uid), 'Archive', { uid: true });
    // Polls every 500 ms meanwhile: each sees the copy in Archive, and INBOX still holding the message.
    await new Promise((r) => setTimeout(r, 1_500));
    await other.messageDelete(String(original.uid), { uid: true });
    const copy = await worker.waitFor(
      () => messagesOf(ACC, 'Archive').find((m) => m.subject === 'moved slowly'),
      20_000,
      'the Archive copy',
    );
    // Relayed with the INBOX expunge as `vanishing`, the Worker's sign that the copy is the same
    // email moving (not a second email, then a delete).
    expect(copy.record.change.type === 'messages' && copy.record.change.vanishing).toEqual([
      { path: 'INBOX', uidvalidity: expect.any(Number), uids: [original.uid] },
    ]);
    const vanished = await waitForVanished(ACC, 'INBOX', original.uid, 10_000);
    expect(worker.changes.indexOf(copy.record)).toBeLessThan(worker.changes.indexOf(vanished));
  });
});

describe('new mail while a poll holds the IDLE connection', () => {
  const ACC = 'acc_bob_poll';
  const GATEWAY = 'gw-poll';
  let proxy: ImapProxy;
  let gateway: GatewayProcess;

  beforeAll(async () => {
    // Plain text through a proxy that sees the gateway's commands and can hold one back.
    proxy = await imapProxy(mail.imapPlainPort);
    const config = configFor('bob');
    config.imap = { ...config.imap, port: proxy.port, encryption: 'NONE' };
    const { folders } = await verifyMailbox(configFor('bob'));
    worker.addAccount(ACC, config, baselineCursors(folders), { onlyGateway: GATEWAY });
    gateway = startGateway({ GATEWAY_ID: GATEWAY });
    await waitForStatus(ACC, 'running');
  });

  afterAll(async () => {
    await gateway?.stop();
    proxy?.close();
  });

  it("fetches a message saved during the poll from the poll's own answer, before going back to IDLE", async () => {
    // The poll leaves IDLE (DONE) for its commands (a pass would begin with STATUS): its first one is
    // held while a message is saved, so the server has no IDLE to push it to. Only the poll's own
    // commands can find it before the connection goes back to IDLE.
    const poll = await proxy.holdNext((line, previous) => previous === 'DONE' && /^\S+ (NOOP|LIST)\b/i.test(line));
    await deliverTo('bob', 'during a poll');
    const mark = poll.connection.sent.length;
    poll.release();
    const message = await waitForMessage(ACC, 'during a poll');
    expect(message.path).toBe('INBOX');
    const after = poll.connection.sent.slice(mark);
    const fetched = after.findIndex((line) => /^\S+ UID FETCH /i.test(line));
    const idled = after.findIndex((line) => /^\S+ IDLE$/i.test(line));
    expect(fetched, `the gateway's commands from the poll's first on: ${after.join(' | ')}`).toBeGreaterThan(0);
    expect(
      idled === -1 || fetched < idled,
      `the gateway's commands from the poll's first on: ${after.join(' | ')}`,
    ).toBe(true);
  });
});
