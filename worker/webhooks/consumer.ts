/**
 * The consumer of the webhooks queue. `{kind: 'event'}` fans an outbox event out to its endpoints
 * and makes the calls at once; `{kind: 'delivery'}` is one conversation's retry. Every message is
 * acknowledged on its own as soon as it is done, and all run concurrently. A message whose handling
 * throws (a database failure, say) is retried by the queue, and after max_retries lands in the DLQ:
 * an event is never lost to an error.
 */
import type { Env, WebhookQueueMessage } from '../env.ts';
import { deliverConversation, deliverEvent, deliveryOptions, type DeliveryOptions } from './delivery.ts';

/** Backoff of a failed message: 2, 4, 8 … seconds, at most a minute. */
const messageRetryDelay = (attempts: number) => Math.min(60, 2 ** attempts);

function handle(env: Env, options: DeliveryOptions, body: WebhookQueueMessage): Promise<void> {
  switch (body?.kind) {
    case 'event':
      return deliverEvent(env, options, body.event_id);
    case 'delivery':
      return deliverConversation(env, options, body.conversation_id);
    default:
      return Promise.reject(new Error(`unknown webhook queue message ${JSON.stringify(body).slice(0, 200)}`));
  }
}

export async function handleWebhookBatch(
  batch: MessageBatch<WebhookQueueMessage>,
  env: Env,
  options: DeliveryOptions = deliveryOptions(),
): Promise<void> {
  await Promise.all(
    batch.messages.map(async (message) => {
      try {
        await handle(env, options, message.body);
        message.ack();
      } catch (err) {
        console.error(
          `webhook queue message ${message.id} failed (attempt ${message.attempts}):`,
          (err as Error).message,
        );
        message.retry({ delaySeconds: messageRetryDelay(message.attempts) });
      }
    }),
  );
}
