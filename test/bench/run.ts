/**
 * `npm run bench [name…]`: benchmarks against the real parts (Dovecot, Postfix, workerd, the gateway).
 * They print numbers; nothing here asserts on time. Names: see BENCHES.
 */
const BENCHES: Record<string, () => Promise<{ run: () => Promise<void> }>> = {
  sync: () => import('./sync.bench.ts'),
  send: () => import('./send.bench.ts'),
  latency: () => import('./latency.bench.ts'),
  query: () => import('./query.bench.ts'),
  webhooks: () => import('./webhooks.bench.ts'),
  memory: () => import('./memory.bench.ts'),
  bundle: () => import('./bundle.bench.ts'),
  'big-folder': () => import('./big-folder.bench.ts'),
  capacity: () => import('./capacity.bench.ts'),
  ingest: () => import('./ingest.bench.ts'),
};

const wanted = process.argv.slice(2);
const names = wanted.length ? wanted : Object.keys(BENCHES);
for (const name of names) {
  const load = BENCHES[name];
  if (!load) {
    console.error(`unknown benchmark ${name}; known: ${Object.keys(BENCHES).join(', ')}`);
    process.exit(2);
  }
  console.log(`\n== ${name} ==`);
  await (await load()).run();
}
process.exit(0);

export {};
