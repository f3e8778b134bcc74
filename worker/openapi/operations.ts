/**
 * Every operation the API serves, described with the zod schemas the routes validate with and the
 * response schemas the presenters are typed by. worker/openapi/document.ts turns this list into the
 * OpenAPI 3.1 document; test/node/openapi.test.ts checks it against the routes Hono serves.
 */
import type { Operation } from './operation.ts';
import { MAIL_OPERATIONS } from './operations-mail.ts';
import { ACCOUNT_OPERATIONS, SERVICE_OPERATIONS } from './operations-service.ts';

export type { Operation } from './operation.ts';

export const OPERATIONS: Operation[] = [...ACCOUNT_OPERATIONS, ...MAIL_OPERATIONS, ...SERVICE_OPERATIONS];
