// Large messages end to end: real Dovecot, `npm start`, the real gateway. A message under the
// gateway's limit is stored whole (staged in parts) and listed; one over it is listed from its
// headers; neither holds back the mail after it.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { connectMailbox } from './connect.ts';
import { endToEndSuite, rfc822, waitListed } from './integrity-helpers.ts';
import { eventually } from './service.ts';

const MB = 1024 * 1024;
/** Lowered for the test, so that a message over it stays cheap to append. */
const LIMIT_BYTES = 75 * MB;

const suite = endToEndSuite('gw-large', { env: { GATEWAY_MAX_MESSAGE_BYTES: String(LIMIT_BYTES) } });

/** A message of about `bytes` bytes: a text part and one base64 attachment, CRLF line ends. */
function bigMessage(subject: string, bytes: number): Buffer {
  const head = rfc822(subject, 'MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary="b0"\r\n', '');
  const text = '--b0\r\nContent-Type: text/plain\r\n\r\nThe text before a large attachment.\r\n';
  const attachmentHead =
    '--b0\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename="big.bin"\r\nContent-Transfer-Encoding: base64\r\n\r\n';
  const line = `${Buffer.from(subject.repeat(60)).toString('base64').slice(0, 76)}\r\n`;
  const lines = Math.ceil((bytes - head.length - text.length - attachmentHead.length) / line.length);
  return Buffer.concat([
    Buffer.from(head + text + attachmentHead),
    Buffer.from(line.repeat(lines)),
    Buffer.from('--b0--\r\n'),
  ]);
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('large messages', () => {
  it('stores a 70 MB message whole, lists one over the limit from its headers, and the mail after them goes on', async () => {
    const alice = await connectMailbox(suite.service, suite.mail.info(), 'alice');
    const client = await suite.imap('alice');
    const big = bigMessage('seventy megabytes', 70 * MB);
    const huge = bigMessage('over the limit', LIMIT_BYTES + 2 * MB);
    await client.append('INBOX', big);
    await client.append('INBOX', huge);
    await client.append('INBOX', rfc822('ordinary after them'));

    const listed = await waitListed(
      suite.service,
      alice.id,
      ['seventy megabytes', 'over the limit', 'ordinary after them'],
      60_000,
    );
    const seventy = listed.get('seventy megabytes');
    expect(seventy.size).toBe(big.length);
    const raw = await suite.service.fetch(`${suite.service.base}/api/v1/emails/${seventy.id}/raw`, {
      headers: { 'X-API-KEY': suite.service.adminKey },
    });
    expect(raw.status).toBe(200);
    expect(sha(Buffer.from(await raw.arrayBuffer()))).toBe(sha(big));
    const one = await suite.service.api('GET', `/emails/${seventy.id}`);
    expect(one.body.from_attendee.identifier).toBe('sender@remote.test');
    expect(one.body.body_plain).toContain('The text before a large attachment.');

    const over = listed.get('over the limit');
    expect(over.size).toBe(huge.length);
    expect(over.from_attendee.identifier).toBe('sender@remote.test');
    expect(over.body_plain).toBe('');
    const overRaw = await suite.service.fetch(`${suite.service.base}/api/v1/emails/${over.id}/raw`, {
      headers: { 'X-API-KEY': suite.service.adminKey },
    });
    expect(overRaw.status).toBe(404);

    // Still running, and its last_error says which message was listed without its body.
    const account = await eventually(
      async () => {
        const res = await suite.service.api('GET', `/accounts/${alice.id}`);
        return res.body.last_error ? res.body : null;
      },
      { what: 'last_error set', timeoutMs: 10_000, intervalMs: 250 },
    );
    expect(account.status).toBe('running');
    expect(account.last_error).toContain('larger than the gateway takes');
    expect(account.last_error).toContain('INBOX');

    // The mail after them is not held back.
    await client.append('INBOX', rfc822('ordinary later'));
    await waitListed(suite.service, alice.id, ['ordinary later'], 60_000);
  }, 300_000);
});
