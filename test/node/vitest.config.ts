import { defineProject } from 'vitest/config';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));

export default defineProject({
  test: {
    name: 'node',
    root,
    include: ['test/node/**/*.test.ts', 'test/mailserver/**/*.test.ts', 'test/imapservers/**/*.test.ts'],
    environment: 'node',
    // End-to-end files start their own servers; one at a time keeps a 2-core machine responsive.
    fileParallelism: false,
    // One shared Dovecot + Postfix for tests that inject('mailserver'); end-to-end files start their own.
    // And the migrated local D1 database that every `npm start` of a test starts from.
    globalSetup: ['test/mailserver/global-setup.ts', 'test/node/state-template.ts'],
    setupFiles: ['test/node/setup.ts'],
    testTimeout: 120_000,
    hookTimeout: 300_000,
  },
});
