import { workerProject } from './project.ts';

/** The worker tests, in workerd; MAIL_SHARDS=3 runs them with three mail shards (`npm run test:shards`). */
export default workerProject({
  name: 'worker',
  shards: Number(process.env.MAIL_SHARDS ?? 1),
  include: ['test/worker/**/*.test.ts'],
});
