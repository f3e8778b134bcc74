import { cloudflareTest, readD1Migrations } from '@cloudflare/vitest-plugin';
import { fileURLToPath } from 'node:url';
import { defineProject } from 'vitest/config';

const root = fileURLToPath(new URL('../..', import.meta.url));

export default defineProject({
  plugins: [
    cloudflareTest(async () => ({
      wrangler: { configPath: `${root}/wrangler.toml` },
      miniflare: {
        bindings: {
          ADMIN_API_KEY: 'test-admin-key',
          CREDENTIALS_KEY: 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=',
          GATEWAY_SECRET: 'test-gateway-secret',
          ALLOW_PRIVATE_WEBHOOK_URLS: 'true',
          TEST_MIGRATIONS: await readD1Migrations(`${root}/migrations`),
        },
      },
    })),
  ],
  test: {
    name: 'worker',
    root,
    include: ['test/worker/**/*.test.ts'],
    setupFiles: ['test/worker/setup.ts'],
  },
});
