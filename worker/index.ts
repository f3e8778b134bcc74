/** The Worker's entry points: HTTP API, webhook queue consumer, scheduled sweeps; and the Durable Object class. */
import { createApp } from './app.ts';
import type { Env } from './env.ts';

export { AccountObject } from './durable/account-object.ts';

const app = createApp();

export default {
  fetch: app.fetch,
} satisfies ExportedHandler<Env>;
