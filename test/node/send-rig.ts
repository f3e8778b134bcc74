// The set-up of the send end-to-end tests: a private Dovecot + Postfix, `npm start`, one gateway,
// alice connected with her SMTP through a proxy that can hold the server's replies (smtp-proxy.ts),
// and bob's INBOX open to count what arrived.
import type { ImapFlow } from 'imapflow';
import { openImap, uidsWithSubject } from '../mailserver/client.ts';
import { startMailServer, type MailServer } from '../mailserver/mailserver.ts';
import { connectMailbox } from './connect.ts';
import { startService, type GatewayProcess, type Service } from './service.ts';
import { slowProxy, type SlowProxy } from './smtp-proxy.ts';

export interface SendRig {
  mail: MailServer;
  service: Service;
  gateway: GatewayProcess;
  proxy: SlowProxy;
  alice: { id: string; email: string };
  bobImap: ImapFlow;
  /** Starts (again) the gateway process, with the same id. */
  startGateway(): GatewayProcess;
  /** How many messages with this subject bob's INBOX holds. */
  inBob(subject: string): Promise<number>;
  /** POST /emails with an Idempotency-Key. */
  send(
    body: unknown,
    key: string,
    signal?: AbortSignal,
  ): Promise<{ status: number; body: any; replayed: string | null }>;
  stop(): Promise<void>;
}

export async function startSendRig(options: {
  gatewayId: string;
  workerEnv: Record<string, string>;
  /** Replies after this many bytes of the message's body are held `holdMs` (smtp-proxy.ts). */
  threshold: number;
  holdMs: number;
}): Promise<SendRig> {
  const mail = await startMailServer();
  const service = await startService({ workerEnv: options.workerEnv });
  const rig: SendRig = {
    mail,
    service,
    gateway: undefined as unknown as GatewayProcess,
    proxy: await slowProxy(mail.smtpsPort, options.threshold, options.holdMs),
    alice: { id: '', email: '' },
    bobImap: await openImap(mail, 'bob'),
    startGateway() {
      rig.gateway = service.startGateway(options.gatewayId, { NODE_EXTRA_CA_CERTS: mail.caFile });
      return rig.gateway;
    },
    inBob: async (subject) => (await uidsWithSubject(rig.bobImap, 'INBOX', subject)).length,
    async send(body, key, signal) {
      const res = await fetch(`${service.base}/api/v1/emails`, {
        method: 'POST',
        headers: { 'X-API-KEY': service.adminKey, 'Content-Type': 'application/json', 'Idempotency-Key': key },
        body: JSON.stringify(body),
        signal,
      });
      return { status: res.status, body: await res.json(), replayed: res.headers.get('Idempotent-Replayed') };
    },
    async stop() {
      await rig.bobImap.logout().catch(() => undefined);
      rig.proxy.close();
      await service.stop();
      await mail.stop();
    },
  };
  rig.startGateway();
  rig.alice = await connectMailbox(service, mail, 'alice', { smtp_port: rig.proxy.port, smtp_encryption: 'SSL' });
  return rig;
}
