/** The shape of one operation of the OpenAPI document (see operations.ts for the list). */
import type { z } from 'zod';

export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

export interface Operation {
  method: Method;
  /** The path as Hono routes it, below the operation's base (`/api/v1` unless `base` says otherwise). */
  path: string;
  base?: '/api/v1' | '';
  operationId: string;
  tag: string;
  summary: string;
  description?: string;
  /** Public: no X-API-KEY. */
  public?: true;
  query?: z.ZodObject;
  /** A JSON body; `multipart` adds multipart/form-data with the same fields (files in `attachments`). */
  body?: { schema: z.ZodType; name: string; multipart?: true; example?: unknown };
  /** The success answer (200 unless `okStatus`): a JSON schema, or another media type (bytes). */
  ok: z.ZodType | { mediaType: string; description: string; schema?: Record<string, unknown> };
  okStatus?: 200 | 201 | 302;
  /** A second success, 202 Accepted with this JSON schema (work done later, e.g. a scheduled send). */
  accepted?: z.ZodType;
  /** Statuses besides 200; 401, 429 and 500 are added to every API operation, 413 to those with a body. */
  errors: number[];
  idempotent?: true;
}
