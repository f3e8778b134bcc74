/**
 * Response schemas shared by every resource: typed ids, timestamps, the error shape and the list
 * envelopes. The presenters are typed by these schemas and the OpenAPI document is generated from
 * them (worker/openapi/), so what the API answers and what the document says are one thing.
 */
import { z } from 'zod';
import { ID_PREFIXES, type IdKind } from '../lib/ids.ts';

/** An id of one kind, as the API returns it: prefix + 26 Crockford base32 characters. */
export const idOf = (kind: IdKind) =>
  z
    .string()
    .regex(new RegExp(`^${ID_PREFIXES[kind]}[0-9A-HJKMNP-TV-Z]{26}$`))
    .meta({ example: `${ID_PREFIXES[kind]}01JD8Z6Q3W4E5R6T7Y8V9K0P1A` });

/** An ISO 8601 timestamp (UTC). */
export const Timestamp = z.iso.datetime({ offset: true }).meta({ example: '2026-11-24T09:30:00.000Z' });

export const ErrorBody = z
  .strictObject({
    status: z.int().meta({ description: 'The HTTP status, repeated.' }),
    type: z.string().meta({ description: '`errors/<kind>`, e.g. `errors/invalid_parameters`.' }),
    title: z.string(),
    detail: z.string().meta({ description: 'What went wrong, naming the parameter or field when there is one.' }),
  })
  .meta({
    id: 'Error',
    description: 'Every error has this shape.',
    example: {
      status: 400,
      type: 'errors/invalid_parameters',
      title: 'Invalid parameters',
      detail: 'limit: must be an integer from 1 to 250',
    },
  });

/** `{object, data, has_more}` (offset-paged lists). */
export const offsetListOf = <T extends z.ZodType>(object: string, item: T) =>
  z
    .strictObject({
      object: z.literal(object),
      data: z.array(item),
      has_more: z.boolean().meta({ description: 'More items follow: ask again with a larger `offset`.' }),
    })
    .meta({ id: object });

/** `{object, data, has_more, cursor}` (cursor-paged lists). */
export const cursorListOf = <T extends z.ZodType>(object: string, item: T) =>
  z
    .strictObject({
      object: z.literal(object),
      data: z.array(item),
      has_more: z.boolean(),
      cursor: z
        .string()
        .nullable()
        .meta({ description: 'Pass it back as `cursor` (with the same filters) for the next page; null on the last.' }),
    })
    .meta({ id: object });

export const Success = z.strictObject({ success: z.literal(true) }).meta({ id: 'Success' });
