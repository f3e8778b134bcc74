// Types of `env` and `exports` from 'cloudflare:workers' inside the test runtime.
type WorkerBindings = import('../../worker/env.ts').Env;

declare namespace Cloudflare {
  interface Env extends WorkerBindings {
    TEST_MIGRATIONS: import('cloudflare:test').D1Migration[];
    /** Small limits of their own for the tests of limits keyed by a constant (test/worker/vitest.config.ts). */
    TEST_WORKSPACE_RATE_LIMIT: RateLimit;
    TEST_KEY_CREATION_RATE_LIMIT: RateLimit;
  }
  interface GlobalProps {
    mainModule: typeof import('../../worker/index.ts');
  }
}
