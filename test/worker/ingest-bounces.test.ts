// Bounce detection when parsing (standard delivery-status and qmail reports, never a person writing
// about one), and the real-world corpora: every message parsed into sane output, no ordinary mail
// flagged, the failed recipient of every bounce found.
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { fromBase64 } from '../../worker/lib/crypto.ts';
import { normalizeAddress, parseMessage } from '../../worker/ingest/parse.ts';
import { expectSane, mail } from './ingest-helpers.ts';

describe('parseMessage: bounces', () => {
  const dsn = (action: string, status: string) =>
    mail([
      'From: Mail Delivery System <MAILER-DAEMON@mx.example.net>',
      'To: sender@example.com',
      'Subject: Undelivered Mail Returned to Sender',
      'Content-Type: multipart/report; report-type=delivery-status; boundary="R"',
      '',
      '--R',
      'Content-Type: text/plain',
      '',
      "I'm sorry to have to inform you that your message could not be delivered.",
      '--R',
      'Content-Type: message/delivery-status',
      '',
      'Reporting-MTA: dns; mx.example.net',
      '',
      'Final-Recipient: rfc822; Gone@Example.org',
      `Action: ${action}`,
      `Status: ${status}`,
      'Diagnostic-Code: smtp; 550 5.1.1 <gone@example.org>: Recipient address',
      '    rejected: User unknown',
      '--R',
      'Content-Type: message/rfc822',
      '',
      'From: sender@example.com',
      'Message-ID: <original@example.com>',
      'Subject: hi',
      '',
      'hello',
      '--R--',
    ]);

  it('reads a standard delivery-status report', async () => {
    const m = await parseMessage(dsn('failed', '5.1.1'));
    expect(m.bounce).toEqual({
      original_message_id: '<original@example.com>',
      recipient: 'Gone@Example.org',
      status: '5.1.1',
      action: 'failed',
      diagnostic: '550 5.1.1 <gone@example.org>: Recipient address rejected: User unknown',
    });
    expect((await parseMessage(dsn('delayed', '4.4.1'))).bounce).toMatchObject({ action: 'delayed', status: '4.4.1' });
  });

  it('does not flag a successful delivery report', async () => {
    expect((await parseMessage(dsn('delivered', '2.0.0'))).bounce).toBeNull();
  });

  it('reads a qmail report', async () => {
    const m = await parseMessage(
      mail([
        'From: MAILER-DAEMON@mail.example.net',
        'Subject: failure notice',
        '',
        'Hi. This is the qmail-send program at mail.example.net.',
        "I'm afraid I wasn't able to deliver your message to the following addresses.",
        "This is a permanent error; I've given up. Sorry it didn't work out.",
        '',
        '<nobody@example.org>:',
        'Sorry, no mailbox here by that name. (#5.1.1)',
        '',
        '--- Below this line is a copy of the message.',
        '',
        'Message-ID: <orig-q@example.com>',
        'To: someone-else@example.com',
      ]),
    );
    expect(m.bounce).toEqual({
      original_message_id: '<orig-q@example.com>',
      recipient: 'nobody@example.org',
      status: '5.1.1',
      action: 'failed',
      diagnostic: 'Sorry, no mailbox here by that name. (#5.1.1)',
    });
  });

  it('does not flag a person writing about a bounce', async () => {
    const m = await parseMessage(
      mail([
        'From: Colleague <colleague@example.com>',
        'Subject: Re: Undelivered Mail Returned to Sender',
        '',
        'My message to bob@example.org could not be delivered, user unknown. Any idea?',
      ]),
    );
    expect(m.bounce).toBeNull();
  });
});

// Fixture files, carried as base64 by the TEST_FIXTURES binding (see vitest.config.ts).
const fixtures = (env as unknown as { TEST_FIXTURES: Record<string, string> }).TEST_FIXTURES;
const fixture = (path: string) => fromBase64(fixtures[path]!);
const fixturePaths = (prefix: string) =>
  Object.keys(fixtures).filter((p) => p.startsWith(prefix) && !p.endsWith('.json') && !p.endsWith('.md'));

describe('real-world corpora', () => {
  const corpus = fixturePaths('corpus/');
  const bounces = fixturePaths('bounces/');
  const manifest = JSON.parse(new TextDecoder().decode(fixture('bounces/manifest.json'))) as Record<string, string>;

  it('has the fixtures (more than 500 messages, 50+ bounces with an expected recipient)', () => {
    expect(corpus.length + bounces.length).toBeGreaterThan(500);
    expect(Object.keys(manifest).length).toBeGreaterThanOrEqual(50);
    expect(Object.keys(manifest).every((path) => bounces.includes(`bounces/${path}`))).toBe(true);
  });

  it('parses every message into sane output', async () => {
    for (const path of [...corpus, ...bounces]) {
      const m = await parseMessage(fixture(path)).catch((error: unknown) => {
        throw new Error(`${path}: ${String(error)}`);
      });
      try {
        expectSane(m);
      } catch (error) {
        throw new Error(`${path}: ${String(error)}`);
      }
    }
  }, 120_000);

  it('never flags ordinary mail as a bounce', async () => {
    const flagged: string[] = [];
    for (const path of corpus) {
      if ((await parseMessage(fixture(path))).bounce) flagged.push(path);
    }
    expect(flagged).toEqual([]);
  }, 120_000);

  it('finds the failed recipient of every bounce in the manifest', async () => {
    const wrong: string[] = [];
    for (const [path, recipient] of Object.entries(manifest)) {
      const { bounce } = await parseMessage(fixture(`bounces/${path}`));
      if (!bounce || normalizeAddress(bounce.recipient) !== normalizeAddress(recipient)) {
        wrong.push(`${path}: expected ${recipient}, got ${bounce?.recipient ?? 'no bounce'}`);
      } else {
        expect(bounce.action).toMatch(/^(?:failed|delayed)$/);
        expect(bounce.status).toMatch(/^[45]\.\d{1,3}\.\d{1,3}$/);
      }
    }
    expect(wrong).toEqual([]);
  }, 120_000);
});
