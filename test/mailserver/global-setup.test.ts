/**
 * Uses the server started once by ./global-setup.ts (via inject), from a
 * vitest worker process, through the JSON-only helpers in ./client.ts.
 */
import { execFile } from 'node:child_process';
import tls from 'node:tls';
import { promisify } from 'node:util';
import { describe, expect, inject, it } from 'vitest';
import { deliver, findUser, openImap } from './client.ts';

const mail = inject('mailserver');
if (!mail)
  throw new Error("no 'mailserver' provided: add test/mailserver/global-setup.ts to this vitest project's globalSetup");

/** Does a TLS connection to IMAPS verify with the process' default CA list? */
function verifiesByDefault(): Promise<boolean> {
  return new Promise((resolve) => {
    const s = tls.connect({ host: mail.host, port: mail.imapPort }, () => {
      resolve(s.authorized);
      s.destroy();
    });
    s.once('error', () => resolve(false));
  });
}

describe('globalSetup mail server', () => {
  it('is provided as plain JSON', () => {
    expect(mail.host).toBe('127.0.0.1');
    expect(findUser(mail, 'bob').email).toBe('bob@example.test');
    expect(findUser(mail, 'BOB@example.test').user).toBe('bob');
    expect(JSON.parse(JSON.stringify(mail))).toEqual(mail);
  });

  it('delivers with client.deliver and reads it with client.openImap', async () => {
    const subject = `global ${Date.now()}`;
    await deliver(mail, { from: 'a@remote.test', to: 'bob@example.test', subject, html: '<p>hi</p>' });
    const c = await openImap(mail, 'bob', { disableAutoIdle: true });
    try {
      await c.mailboxOpen('INBOX');
      const uids = (await c.search({ subject }, { uid: true })) as number[];
      expect(uids).toHaveLength(1);
    } finally {
      await c.logout();
    }
  });

  it('child processes spawned by tests trust the CA via the inherited NODE_EXTRA_CA_CERTS', async () => {
    expect(process.env.NODE_EXTRA_CA_CERTS).toMatch(/node-extra-ca-certs\.pem$/);
    const script = `const s = require('node:tls').connect({ host: '127.0.0.1', port: ${mail.imapPort} }, () => { console.log(s.authorized); s.destroy(); }); s.on('error', (e) => { console.log(e.code); });`;
    const { stdout } = await promisify(execFile)(process.execPath, ['-e', script]);
    expect(stdout.trim()).toBe('true');
  });

  it('vitest workers (forks pool) trust the CA by default through NODE_EXTRA_CA_CERTS', async () => {
    expect(await verifiesByDefault()).toBe(true);
  });
});
