import { workerProject } from './project.ts';

/**
 * Part of the worker tests again with three mail shards, inside `npm test`: the shard tests, and the
 * files whose paths cross shards most.
 * `npm run test:shards` runs the whole worker suite with three.
 */
export default workerProject({
  name: 'worker-shards',
  shards: 3,
  include: ['test/worker/shards/**/*.test.ts', 'test/worker/webhooks.test.ts'],
});
