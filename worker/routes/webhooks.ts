import { secretKeys } from '../lib/crypto.ts';
import { Hono } from 'hono';
import { z } from 'zod';
import type { AppEnv } from '../env.ts';
import type { Env } from '../env.ts';
import { invalid, notFound } from '../lib/errors.ts';
import { newId, parseId } from '../lib/ids.ts';
import { offsetList, offsetPaging } from '../lib/paging.ts';
import { isoNow } from '../lib/time.ts';
import { parseJsonBody, parseQuery } from '../lib/validation.ts';
import {
  completeDeliveryRows,
  DELIVERY_SELECT,
  type DeliveryRow,
  dropWaitingStatement,
  presentConversation,
} from '../webhooks/conversations.ts';
import { visibleEvent } from '../events/feed.ts';
import { dropUnwantedStatement, NO_LONGER_WANTED } from '../webhooks/audience.ts';
import { attemptDelivery, loadDeliveryRow } from '../webhooks/delivery.ts';
import { deliveryOptions } from '../webhooks/schedule.ts';
import {
  assertAccountsExist,
  createEndpointBody,
  type EndpointRow,
  endpointColumns,
  loadEndpoint,
  patchEndpointBody,
  presentEndpoint,
} from '../webhooks/endpoints.ts';
import { newEndpointSecret, sealEndpointSecret } from '../webhooks/signing.ts';

const allowPrivateUrls = (env: Env) => env.ALLOW_PRIVATE_WEBHOOK_URLS === 'true';

export const ConversationListQuery = offsetPaging.extend({
  endpoint_id: z.string({ error: 'is required: the we_… id of the endpoint whose calls to list' }),
  event_id: z.string().optional(),
});

export const webhooks = new Hono<AppEnv>()
  .post('/endpoints', async (c) => {
    const fields = await parseJsonBody(c, createEndpointBody(allowPrivateUrls(c.env)));
    await assertAccountsExist(c.env.DB, fields.account_ids);
    const id = newId('endpoint');
    const now = isoNow();
    const columns = {
      id,
      ...endpointColumns(fields),
      secret: await sealEndpointSecret(secretKeys(c.env), id, newEndpointSecret()),
      created_at: now,
      updated_at: now,
    };
    const names = Object.keys(columns);
    const row = await c.env.DB.prepare(
      `INSERT INTO webhook_endpoints (${names.join(', ')}) VALUES (${names.map(() => '?').join(', ')}) RETURNING *`,
    )
      .bind(...Object.values(columns))
      .first<EndpointRow>();
    return c.json(await presentEndpoint(row!, secretKeys(c.env)));
  })
  .get('/endpoints', async (c) => {
    const { limit, offset } = parseQuery(c, offsetPaging);
    const { results } = await c.env.DB.prepare(
      'SELECT * FROM webhook_endpoints ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?',
    )
      .bind(limit + 1, offset)
      .all<EndpointRow>();
    const data = await Promise.all(results.map((row) => presentEndpoint(row, secretKeys(c.env))));
    return c.json(offsetList('WebhookEndpoints', data, limit));
  })
  .get('/endpoints/:id', async (c) =>
    c.json(await presentEndpoint(await loadEndpoint(c.env.DB, c.req.param('id')), secretKeys(c.env))),
  )
  .patch('/endpoints/:id', async (c) => {
    const current = await loadEndpoint(c.env.DB, c.req.param('id'));
    const fields = await parseJsonBody(c, patchEndpointBody(allowPrivateUrls(c.env)));
    await assertAccountsExist(c.env.DB, fields.account_ids);
    const columns = { ...endpointColumns(fields), updated_at: isoNow() };
    const update = c.env.DB.prepare(
      `UPDATE webhook_endpoints SET ${Object.keys(columns)
        .map((name) => `${name} = ?`)
        .join(', ')} WHERE id = ? RETURNING *`,
    ).bind(...Object.values(columns), current.id);
    // Pausing, or narrowing what it takes, drops the waiting calls it no longer wants, in the same
    // transaction; a call already claimed checks again just before it is made (webhooks/audience.ts).
    const [updated, dropped] = await c.env.DB.batch<EndpointRow>([
      update,
      dropUnwantedStatement(c.env.DB, current.id, Date.now()),
    ]);
    const row = updated!.results[0];
    if (!row) throw notFound('Webhook endpoint');
    if (dropped!.meta.changes > 0)
      console.log(`webhook endpoint ${current.id} changed: ${dropped!.meta.changes} waiting calls ${NO_LONGER_WANTED}`);
    return c.json(await presentEndpoint(row, secretKeys(c.env)));
  })
  .delete('/endpoints/:id', async (c) => {
    const id = parseId('endpoint', c.req.param('id'));
    if (!id) throw notFound('Webhook endpoint');
    const [deleted] = await c.env.DB.batch([
      c.env.DB.prepare('DELETE FROM webhook_endpoints WHERE id = ?').bind(id),
      dropWaitingStatement(c.env.DB, id),
    ]);
    if (deleted!.meta.changes === 0) throw notFound('Webhook endpoint');
    return c.json({ success: true });
  })
  .get('/conversations', async (c) => {
    const query = parseQuery(c, ConversationListQuery);
    const endpoint = await loadEndpoint(c.env.DB, query.endpoint_id);
    let sql = `${DELIVERY_SELECT} WHERE c.endpoint_id = ? AND ${visibleEvent('ev.')}`;
    const binds: (string | number)[] = [endpoint.id];
    if (query.event_id !== undefined) {
      // A malformed event id in a filter finds nothing (DECISIONS.md, "Finer points").
      if (!parseId('event', query.event_id)) return c.json(offsetList('WebhookConversations', [], query.limit));
      sql += ' AND c.event_id = ?';
      binds.push(query.event_id);
    }
    const { results } = await c.env.DB.prepare(`${sql} ORDER BY c.created_at DESC, c.id DESC LIMIT ? OFFSET ?`)
      .bind(...binds, query.limit + 1, query.offset)
      .all<DeliveryRow>();
    const rows = await completeDeliveryRows(c.env.DB, results);
    return c.json(offsetList('WebhookConversations', rows.map(presentConversation), query.limit));
  })
  .post('/conversations/:id/retry', async (c) => {
    const id = parseId('conversation', c.req.param('id'));
    const row = id ? await loadDeliveryRow(c.env.DB, id) : null;
    if (!row) throw notFound('Webhook conversation');
    if (row.endpoint_enabled !== 1)
      throw invalid(`the endpoint ${row.endpoint_id} is paused; enable it before retrying`);
    return c.json(presentConversation(await attemptDelivery(c.env, deliveryOptions(), row)));
  });
