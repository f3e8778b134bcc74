// Types of `env` and `exports` from 'cloudflare:workers' inside the test runtime.
type WorkerBindings = import('../../worker/env.ts').Env;

declare namespace Cloudflare {
  interface Env extends WorkerBindings {
    TEST_MIGRATIONS: import('cloudflare:test').D1Migration[];
  }
  interface GlobalProps {
    mainModule: typeof import('../../worker/index.ts');
  }
}
