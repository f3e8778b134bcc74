import { defineConfig } from 'vitest/config';

// Two kinds of tests: worker code inside workerd (Cloudflare's vitest integration; a part of it again
// with three mail shards), and Node code (gateway, end-to-end runs of `npm start` against real
// Dovecot/Postfix) in plain vitest.
export default defineConfig({
  test: {
    projects: ['test/worker/vitest.config.ts', 'test/worker/vitest.shards.config.ts', 'test/node/vitest.config.ts'],
  },
});
