/**
 * vitest globalSetup: start one Dovecot + Postfix for the whole run and hand
 * its JSON description to the tests, which use ./client.ts:
 *
 *   // vitest.config.ts
 *   test: { globalSetup: ['test/mailserver/global-setup.ts'] }
 *
 *   // some.test.ts
 *   import { inject } from 'vitest';
 *   import { deliver, openImap } from '../mailserver/client.ts';
 *   const mail = inject('mailserver');
 *
 * Trusting the test CA:
 *  - client.ts passes it explicitly (`tls: { ca }`);
 *  - inside a worker, call `trustTestCa(mail)` (client.ts) to make every TLS
 *    connection of that process (code under test too) trust it;
 *  - this setup points NODE_EXTRA_CA_CERTS at a bundle of the previous
 *    NODE_EXTRA_CA_CERTS file (if any) plus the test CA before vitest starts
 *    its workers, so with the default `forks` pool every worker, and every
 *    process a test spawns (e.g. the gateway), trusts it. Node reads the
 *    variable only at process start, so for `threads` workers or processes
 *    started earlier, call `trustTestCa(mail)` from client.ts instead.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { startMailServer } from './mailserver.ts';
import { readCa, type MailServerInfo } from './client.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    mailserver: MailServerInfo;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = await startMailServer();
  const previous = process.env.NODE_EXTRA_CA_CERTS;
  const bundle = path.join(server.dir, 'tls', 'node-extra-ca-certs.pem');
  const inherited = previous && fs.existsSync(previous) ? `${fs.readFileSync(previous, 'utf8').trimEnd()}\n` : '';
  fs.writeFileSync(bundle, inherited + readCa(server));
  process.env.NODE_EXTRA_CA_CERTS = bundle;
  project.provide('mailserver', server.info());
  return async () => {
    if (previous === undefined) delete process.env.NODE_EXTRA_CA_CERTS;
    else process.env.NODE_EXTRA_CA_CERTS = previous;
    await server.stop();
  };
}
