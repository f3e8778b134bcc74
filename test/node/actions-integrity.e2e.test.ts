// End to end: mailbox actions address the message the API means (also mail that arrived since the
// last action), and messages of any size or shape are listed (no poison message). Real Dovecot,
// `npm start`, the real gateway.
import { createHash, randomBytes } from 'node:crypto';
import type { ImapFlow } from 'imapflow';
import { describe, expect, it } from 'vitest';
import { connectMailbox } from './connect.ts';
import { endToEndSuite, rfc822, waitListed } from './integrity-helpers.ts';

const suite = endToEndSuite('gw-actions');

/** Where a subject is on the server: folder path → its flags, read with a fresh look at each folder. */
async function onServer(client: ImapFlow, subject: string): Promise<Map<string, string[]>> {
  const found = new Map<string, string[]>();
  for (const folder of await client.list()) {
    const lock = await client.getMailboxLock(folder.path, { readOnly: true });
    try {
      for (const uid of (await client.search({ subject }, { uid: true })) || []) {
        const msg = await client.fetchOne(String(uid), { flags: true }, { uid: true });
        if (msg) found.set(folder.path, [...(msg.flags ?? [])]);
      }
    } finally {
      lock.release();
    }
  }
  return found;
}

describe('mailbox actions', () => {
  it('three actions in a row on mail that arrived after the previous one: each done on the server as answered', async () => {
    const alice = await connectMailbox(suite.service, suite.mail.info(), 'alice');
    const client = await suite.imap('alice');
    const folders = (await suite.service.api('GET', `/folders?account_id=${alice.id}`)).body.data;
    const idOf = (path: string) => folders.find((f: any) => f.provider_id === path).id;
    const deliver = async (subject: string) => {
      await suite.mail.deliver({ from: 'x@remote.test', to: 'alice@example.test', subject, text: subject });
      return (await waitListed(suite.service, alice.id, [subject])).get(subject);
    };

    // 1. Move by role name.
    const first = await deliver('action one');
    const moved = await suite.service.api('PUT', `/emails/${first.id}`, { folders: ['ARCHIVE'] });
    expect(moved.status, JSON.stringify(moved.body)).toBe(200);
    expect(moved.body).toMatchObject({ id: first.id, folders: [idOf('Archive')] });
    expect([...(await onServer(client, 'action one')).keys()]).toEqual(['Archive']);

    // 2. Move by folder id, on a message that arrived after the first action.
    const second = await deliver('action two');
    const junked = await suite.service.api('PUT', `/emails/${second.id}`, { folders: [idOf('Junk')] });
    expect(junked.status, JSON.stringify(junked.body)).toBe(200);
    expect(junked.body).toMatchObject({ id: second.id, folders: [idOf('Junk')] });
    expect([...(await onServer(client, 'action two')).keys()]).toEqual(['Junk']);

    // 3. A flag, on a message that arrived after the second action.
    const third = await deliver('action three');
    const starred = await suite.service.api('PUT', `/emails/${third.id}`, { starred: true });
    expect(starred.status, JSON.stringify(starred.body)).toBe(200);
    expect(starred.body).toMatchObject({ id: third.id, folders: [idOf('INBOX')] });
    const listed = (await suite.service.listEmails(alice.id)).find((e: any) => e.id === third.id);
    expect(listed).toMatchObject({ folder_ids: [idOf('INBOX')], starred: true });
    const third_ = await onServer(client, 'action three');
    expect([...third_.keys()]).toEqual(['INBOX']);
    expect(third_.get('INBOX')).toContain('\\Flagged');
  });
});

describe('messages of any size', () => {
  it('lists a 40 MB message and one with 2 MB of headers, and the ordinary mail behind them', async () => {
    const bob = await connectMailbox(suite.service, suite.mail.info(), 'bob');
    const client = await suite.imap('bob');
    const payload = randomBytes(29 * 1024 * 1024)
      .toString('base64')
      .replace(/.{76}/g, '$&\r\n');
    const big = rfc822(
      'forty megabytes',
      'MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary="b"\r\n',
      `--b\r\nContent-Type: text/plain\r\n\r\nsee attachment\r\n--b\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename="big.bin"\r\nContent-Transfer-Encoding: base64\r\n\r\n${payload}\r\n--b--\r\n`,
    );
    const filler = Array.from({ length: 2_000 }, (_, i) => `X-Filler-${i}: ${'h'.repeat(1_000)}\r\n`).join('');
    const ordinary = ['ordinary 1', 'ordinary 2', 'ordinary 3'];
    const started = Date.now();
    await client.append('INBOX', big);
    await client.append('INBOX', rfc822('two megabytes of headers', filler));
    for (const subject of ordinary) await client.append('INBOX', rfc822(subject));

    const listed = await waitListed(suite.service, bob.id, ordinary, 180_000);
    console.log(`[large] three ordinary messages behind a 40 MB one listed after ${Date.now() - started} ms`);
    const all = await waitListed(
      suite.service,
      bob.id,
      ['forty megabytes', 'two megabytes of headers', ...ordinary],
      180_000,
    );
    expect(all.size).toBe(5);
    expect(listed.size).toBeGreaterThanOrEqual(3);

    const rawOf = async (id: string) => {
      const res = await suite.service.fetch(`${suite.service.base}/api/v1/emails/${id}/raw`, {
        headers: { 'X-API-KEY': suite.service.adminKey },
      });
      expect(res.status).toBe(200);
      return Buffer.from(await res.arrayBuffer());
    };
    const sha = (b: string | Buffer) => createHash('sha256').update(b).digest('hex');
    expect(sha(await rawOf(all.get('forty megabytes').id))).toBe(sha(big));
    const headers = (await suite.service.api('GET', `/emails/${all.get('two megabytes of headers').id}`)).body.headers;
    expect(headers.filter((h: any) => h.name.toLowerCase().startsWith('x-filler-'))).toHaveLength(2_000);
  });
});
