/**
 * The HTTP API: Hono under /api/v1. Authentication, the body size limit and the error shape are
 * applied here once, for every route.
 */
import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { z } from 'zod';
import type { AppEnv } from './env.ts';
import { ApiError, errorResponse } from './lib/errors.ts';
import { requireApiKey } from './lib/auth.ts';
import { describeIssues } from './lib/validation.ts';
import { apiKeys } from './routes/api-keys.ts';
import { accounts, authIntent } from './routes/accounts.ts';
import { drafts, emails } from './routes/emails.ts';
import { contacts } from './routes/contacts.ts';
import { events } from './routes/events.ts';
import { databases } from './routes/databases.ts';
import { gateways } from './routes/gateways.ts';
import { openApi } from './routes/openapi.ts';
import { folders } from './routes/folders.ts';
import { folderActions } from './routes/folder-actions.ts';
import { accountScoped } from './routes/account-scoped.ts';
import { MAX_INTERNAL_BODY_BYTES, requireGatewaySignature } from './gateways/auth.ts';
import { gatewayRoutes } from './gateways/routes.ts';
import { webhooks } from './routes/webhooks.ts';
import { accountEmailActions, emailActions } from './routes/actions.ts';
import { saveDraft, sendEmail } from './routes/send.ts';
import { scheduledEmails } from './routes/scheduled.ts';
import { tracking } from './routes/tracking.ts';
import { mailView } from './dashboard/mail-view.ts';
import { mcpEndpoint } from './mcp/endpoint.ts';

/** Requests may carry attachments up to 30 MB. */
export const MAX_BODY_BYTES = 30 * 1024 * 1024;

export function createApp(): Hono<AppEnv> {
  const app = new Hono<AppEnv>();

  app.onError((err, c) => {
    if (err instanceof ApiError) return errorResponse(err.kind, err.detail, err.headers);
    if (err instanceof z.ZodError) return errorResponse('invalid_parameters', describeIssues(err));
    // Only the method and the route pattern are logged: never the query, headers or body.
    console.error(
      `unexpected error on ${c.req.method} ${c.req.routePath}:`,
      err instanceof Error ? err.stack : String(err),
    );
    return errorResponse('unexpected_error', 'Something went wrong on our side; the error has been logged.');
  });

  app.notFound((c) => errorResponse('not_found', `No route for ${c.req.method} ${new URL(c.req.url).pathname}.`));

  const v1 = new Hono<AppEnv>();
  v1.use(
    '*',
    bodyLimit({
      maxSize: MAX_BODY_BYTES,
      onError: () => errorResponse('payload_too_large', 'The request body is larger than 30 MB.'),
    }),
  );
  v1.use('*', requireApiKey);
  v1.route('/api-keys', apiKeys);
  v1.route('/accounts', accounts);
  v1.route('/auth', authIntent);
  v1.route('/folders', folders);
  // Before /emails: its /{email_id} would take "scheduled" for an id.
  v1.route('/emails/scheduled', scheduledEmails);
  v1.route('/emails', emails);
  v1.route('/emails', sendEmail);
  v1.route('/emails', emailActions);
  v1.route('/drafts', drafts);
  v1.route('/drafts', saveDraft);
  v1.route('/contacts', contacts);
  v1.route('/webhooks', webhooks);
  v1.route('/events', events);
  v1.route('/gateways', gateways);
  v1.route('/databases', databases);
  // Last: the account-scoped paths start with a parameter.
  v1.route('/', accountScoped);
  v1.route('/', accountEmailActions);
  v1.route('/', folderActions);
  v1.notFound((c) => errorResponse('not_found', `No route for ${c.req.method} ${new URL(c.req.url).pathname}.`));

  // The document and its reference page need no key: registered before the API, whose middleware
  // never runs for a request these answered.
  app.route('/api/v1', openApi);
  app.route('/api/v1', v1);
  // The gateway's side door: signed with GATEWAY_SECRET, never reachable with an API key. A call is
  // verified (signature, declared length, nonce) before its body is read; bodies are capped.
  app.use('/internal/*', requireGatewaySignature);
  app.use(
    '/internal/*',
    bodyLimit({
      maxSize: MAX_INTERNAL_BODY_BYTES,
      onError: () => errorResponse('payload_too_large', 'The gateway call is larger than allowed.'),
    }),
  );
  app.route('/internal/gateway', gatewayRoutes);
  // Open pixel and click redirects of tracked emails: public, signed links (no API key).
  app.route('/t', tracking);
  // The dashboard itself is static assets (wrangler.toml [assets]); this is its mail frame (no API key).
  app.route('/mail-view', mailView);
  // The API for AI agents (Model Context Protocol): its tools call the routes above with the caller's key.
  app.route(
    '/mcp',
    mcpEndpoint((request, env, ctx) => app.fetch(request, env, ctx)),
  );
  return app;
}
