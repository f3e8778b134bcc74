// Runs only the mail server harness' own tests:
//   npx vitest run -c test/mailserver/vitest.config.ts
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    root: fileURLToPath(new URL('../..', import.meta.url)),
    include: ['test/mailserver/**/*.test.ts'],
    globalSetup: ['test/mailserver/global-setup.ts'],
    testTimeout: 120_000,
    hookTimeout: 300_000,
  },
});
