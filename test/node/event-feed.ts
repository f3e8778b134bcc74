/**
 * Events as subscribers get them. The outbox keeps an email event's data as a snapshot (the email's
 * id and what can change), made whole again when read: tests read the data through the feed
 * (GET /events), which is what webhooks and feed readers receive.
 */
import type { Service } from './service.ts';

export interface FedEvent {
  id: string;
  type: string;
  created_at: string;
  data: any;
}

/** Every event of the account in the feed (oldest first), optionally only of these types. */
export async function feedEvents(service: Service, accountId: string, types: string[] = []): Promise<FedEvent[]> {
  const out: FedEvent[] = [];
  let cursor: string | null = null;
  do {
    const query = new URLSearchParams({ account_id: accountId, limit: '250' });
    for (const type of types) query.append('type', type);
    if (cursor) query.set('cursor', cursor);
    const { status, body } = await service.api('GET', `/events?${query}`);
    if (status !== 200) throw new Error(`GET /events answered ${status}: ${JSON.stringify(body)}`);
    out.push(...body.data.map((e: FedEvent) => ({ id: e.id, type: e.type, created_at: e.created_at, data: e.data })));
    cursor = body.cursor;
  } while (cursor);
  return out;
}
