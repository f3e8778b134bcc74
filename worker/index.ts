/** The Worker's entry points: HTTP API, webhook queue consumer, scheduled sweeps; and the Durable Object class. */
import { resealStale } from './accounts/reseal.ts';
import { resumeStalledPurges } from './accounts/remove.ts';
import { createApp } from './app.ts';
import { meterCall, meteredEnv, meterInvocation, routeKind } from './lib/d1-meter.ts';
import type { Env, WebhookQueueMessage } from './env.ts';
import { handleWebhookBatch } from './webhooks/consumer.ts';
import { runSweep } from './webhooks/sweep.ts';

export { AccountObject } from './durable/account-object.ts';
export { GatewayObject } from './durable/gateway-object.ts';

const app = createApp();

export default {
  fetch: (request: Request, env: Env, ctx: ExecutionContext) => {
    const kind = routeKind(request);
    meterInvocation(env, kind);
    return meterCall(env, kind, async () => app.fetch(request, meteredEnv(env), ctx));
  },
  queue: (batch, env) => {
    meterInvocation(env, 'queue');
    return handleWebhookBatch(batch, meteredEnv(env));
  },
  scheduled: async (_controller, rawEnv) => {
    meterInvocation(rawEnv, 'scheduled');
    const env = meteredEnv(rawEnv);
    await runSweep(env);
    await resumeStalledPurges(env);
    await resealStale(env);
  },
} satisfies ExportedHandler<Env, WebhookQueueMessage>;
