import { Hono } from 'hono';
import type { AppEnv } from '../env.ts';
import { ContactListQuery, listContacts } from '../contacts/list.ts';
import { parseQuery } from '../lib/validation.ts';

export const contacts = new Hono<AppEnv>().get('/', async (c) =>
  c.json(await listContacts(c.env, parseQuery(c, ContactListQuery))),
);
