/** GET /events (the events feed, oldest first) and GET /events/{id}: see events/feed.ts. */
import { Hono } from 'hono';
import type { AppEnv } from '../env.ts';
import { EventListQuery, eventListInput, getEvent, listEvents } from '../events/feed.ts';
import { parseOrThrow } from '../lib/validation.ts';

export const events = new Hono<AppEnv>()
  .get('/', async (c) =>
    c.json(await listEvents(c.env, parseOrThrow(EventListQuery, eventListInput(c.req.query(), c.req.queries('type'))))),
  )
  .get('/:id', async (c) => c.json(await getEvent(c.env, c.req.param('id'))));
