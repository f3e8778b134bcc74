import { workerProject } from './project.ts';

/**
 * Part of the worker tests again with three mail shards, inside `npm test`: the shard tests, and the
 * files whose paths cross shards most (sync and folders, sends, webhooks, removal and erasure).
 * `npm run test:shards` runs the whole worker suite with three.
 */
export default workerProject({
  name: 'worker-shards',
  shards: 3,
  include: [
    'test/worker/shards/**/*.test.ts',
    'test/worker/webhook-endpoints.test.ts',
    'test/worker/webhook-delivery.test.ts',
    'test/worker/webhook-sweep.test.ts',
    'test/worker/webhook-conversations.test.ts',
    'test/worker/sync-new-mail.test.ts',
    'test/worker/sync-moves.test.ts',
    'test/worker/sync-gateway.test.ts',
    'test/worker/sync-folders.test.ts',
    'test/worker/send-validation.test.ts',
    'test/worker/send-idempotency.test.ts',
    'test/worker/send-tracking.test.ts',
    'test/worker/send-bounces.test.ts',
    'test/worker/erasure.test.ts',
  ],
});
