/** The one part of node:async_hooks the Worker uses (nodejs_compat has it; the Worker is typed with Cloudflare's types only). */
declare module 'node:async_hooks' {
  export class AsyncLocalStorage<T> {
    run<R>(store: T, callback: () => R): R;
    getStore(): T | undefined;
  }
}
