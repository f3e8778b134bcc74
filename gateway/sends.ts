/**
 * Sends carried out for the Worker. Each outgoing message (named by the Worker's key) is sent at
 * most once by this process however often it is asked (a request re-sent on a new control socket,
 * a repeat after the Worker stopped waiting): a repeat gets the first run's answer. Its outcome is
 * also reported to the Worker by a signed call, because the Worker may no longer be waiting for the
 * answer on the socket and must learn it without sending again (worker/send/idempotency.ts).
 */
import type { GatewayRequest, OutgoingResult } from '../common/relay.ts';
import { GatewayError } from './errors.ts';
import { errorFields, type Logger } from './log.ts';
import type { MailboxCommands } from './mailbox.ts';
import { countSend } from './metrics.ts';
import type { WorkerClient } from './worker-client.ts';

type SendRequest = Extract<GatewayRequest, { op: 'send' }>;

/** How long a send's answer is remembered: longer than any wait or retry of the Worker's. */
const REMEMBER_MS = 60 * 60 * 1000;

export class OutgoingSends {
  #runs = new Map<string, { result: Promise<OutgoingResult>; startedAt: number }>();
  #worker: WorkerClient;
  #log: Logger;

  constructor(worker: WorkerClient, log: Logger) {
    this.#worker = worker;
    this.#log = log;
  }

  /** Sends (or saves) the message once; `commands` gives the account's connection when it runs. */
  run(request: SendRequest, commands: () => MailboxCommands): Promise<OutgoingResult> {
    const now = Date.now();
    for (const [id, run] of this.#runs) if (now - run.startedAt > REMEMBER_MS) this.#runs.delete(id);
    const id = `${request.account_id}/${request.key}`;
    const known = this.#runs.get(id);
    if (known) return known.result;
    const result = this.#send(request, commands);
    countSend(result);
    this.#runs.set(id, { result, startedAt: now });
    return result;
  }

  async #send(request: SendRequest, commands: () => MailboxCommands): Promise<OutgoingResult> {
    // Before this point nothing can have gone out: a failure is just the answer.
    const account = commands();
    const message = await this.#worker.outgoing(request.account_id, request.key);
    try {
      const result = await account.send(request.mode, message, request.append_to);
      this.#report(request.account_id, { message_id: message.message_id, sent: true, detail: null });
      return result;
    } catch (err) {
      // Only a failure that is known to have sent nothing is reported; the rest stays unknown.
      if (!(err instanceof GatewayError) || !err.mayHaveSent) {
        const detail = err instanceof Error ? err.message.slice(0, 1000) : String(err);
        this.#report(request.account_id, { message_id: message.message_id, sent: false, detail });
      }
      throw err;
    }
  }

  #report(accountId: string, outcome: { message_id: string; sent: boolean; detail: string | null }): void {
    this.#worker.sendOutcome(accountId, outcome, { attempts: 5 }).catch((err: unknown) => {
      this.#log.warn('could not report a send outcome', {
        account: accountId,
        message_id: outcome.message_id,
        ...errorFields(err),
      });
    });
  }
}
