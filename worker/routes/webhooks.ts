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
import { findInShards } from '../shards/spread.ts';
import {
  dropOnEveryShard,
  dropWaitingStatement,
  listConversations,
  presentConversation,
} from '../webhooks/conversations.ts';
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
    const row = await c.env.DB.prepare(
      `UPDATE webhook_endpoints SET ${Object.keys(columns)
        .map((name) => `${name} = ?`)
        .join(', ')} WHERE id = ? RETURNING *`,
    )
      .bind(...Object.values(columns), current.id)
      .first<EndpointRow>();
    if (!row) throw notFound('Webhook endpoint');
    // Pausing, or narrowing what it takes, drops the waiting calls made before it that it no longer
    // wants, in every shard; any call checks the endpoint again just before it is made (audience.ts).
    const changedAt = Date.parse(row.updated_at);
    const total = await dropOnEveryShard(c.env, row.id, (db) => dropUnwantedStatement(db, row, changedAt));
    if (total > 0) console.log(`webhook endpoint ${current.id} changed: ${total} waiting calls ${NO_LONGER_WANTED}`);
    return c.json(await presentEndpoint(row, secretKeys(c.env)));
  })
  .delete('/endpoints/:id', async (c) => {
    const id = parseId('endpoint', c.req.param('id'));
    if (!id) throw notFound('Webhook endpoint');
    const deleted = await c.env.DB.prepare('DELETE FROM webhook_endpoints WHERE id = ?').bind(id).run();
    if (deleted.meta.changes === 0) throw notFound('Webhook endpoint');
    // From here no call to it is made (each checks the directory first); its waiting calls show dropped.
    await dropOnEveryShard(c.env, id, (db) => dropWaitingStatement(db, id));
    return c.json({ success: true });
  })
  .get('/conversations', async (c) => {
    const query = parseQuery(c, ConversationListQuery);
    const endpoint = await loadEndpoint(c.env.DB, query.endpoint_id);
    // A malformed event id in a filter finds nothing (DECISIONS.md, "Finer points").
    if (query.event_id !== undefined && !parseId('event', query.event_id))
      return c.json(offsetList('WebhookConversations', [], query.limit));
    const filter = { endpointId: endpoint.id, eventId: query.event_id };
    const rows = await listConversations(c.env, filter, query.limit, query.offset);
    return c.json(offsetList('WebhookConversations', rows.map(presentConversation), query.limit));
  })
  .post('/conversations/:id/retry', async (c) => {
    const id = parseId('conversation', c.req.param('id'));
    const found = id
      ? await findInShards(c.env, async (env) => {
          const row = await loadDeliveryRow(env, id);
          return row && { env, row };
        })
      : null;
    if (!found) throw notFound('Webhook conversation');
    const { env, row } = found;
    if (row.endpoint_enabled !== 1)
      throw invalid(`the endpoint ${row.endpoint_id} is paused; enable it before retrying`);
    return c.json(presentConversation(await attemptDelivery(env, deliveryOptions(), row)));
  });
