/**
 * /mcp: the API as a Model Context Protocol server, over the Streamable HTTP transport, stateless
 * (every POST is answered on its own, as JSON; no sessions, no server-sent stream, so GET and DELETE
 * are 405). The key is checked before anything else, the body is read only after that (server.ts),
 * and each tool call goes through the REST API with the same key (tools.ts).
 */
import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { AppEnv } from '../env.ts';
import { authenticateApiKey } from '../lib/auth.ts';
import { errorResponse } from '../lib/errors.ts';

/** MCP requests are JSON-RPC messages; attachments sent through a tool stay under this. */
export const MAX_MCP_BODY_BYTES = 4 * 1024 * 1024;

/** The key of an MCP request: MCP clients send bearer tokens; X-API-KEY works as well. */
export function mcpApiKey(c: Context): string | undefined {
  const bearer = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(c.req.header('Authorization') ?? '')?.[1];
  return c.req.header('X-API-KEY') || bearer;
}

/** The route; `restFetch` is the app's own fetch, which tool calls go through. */
export function mcpEndpoint(restFetch: Hono<AppEnv>['fetch']) {
  return new Hono<AppEnv>().all(
    '/',
    (c, next) =>
      authenticateApiKey(
        c,
        mcpApiKey(c),
        'No API key: send it as Authorization: Bearer <key> or in the X-API-KEY header.',
        next,
        { 'WWW-Authenticate': 'Bearer realm="mailbox-edge"' },
      ),
    bodyLimit({
      maxSize: MAX_MCP_BODY_BYTES,
      onError: () => errorResponse('payload_too_large', 'The MCP request is larger than 4 MB.'),
    }),
    async (c) => {
      if (c.req.method !== 'POST')
        return errorResponse('method_not_allowed', 'This MCP server is stateless: POST only.', { Allow: 'POST' });
      // Loaded on the first MCP request, so that the REST API's cold start does not pay for the SDK.
      const { answer } = await import('./server.ts');
      const rest = {
        origin: new URL(c.req.url).origin,
        key: mcpApiKey(c)!,
        fetch: async (request: Request) => restFetch(request, c.env, c.executionCtx),
      };
      return answer(c.req.raw, rest);
    },
  );
}
