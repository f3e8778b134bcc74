/**
 * /mcp: the API as a Model Context Protocol server, over the Streamable HTTP transport, stateless
 * (every POST is answered on its own, as JSON; no sessions, no server-sent stream, so GET and DELETE
 * are 405). The key is checked before anything else, the body is read only after that, and each
 * tool call goes through the REST API with the same key (tools.ts).
 *
 * The SDK's low-level Server is used rather than McpServer: McpServer validates arguments with its
 * own schemas and words, while here the REST routes judge them, so that the refusals are theirs.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { AppEnv } from '../env.ts';
import { authenticateApiKey } from '../lib/auth.ts';
import { errorResponse } from '../lib/errors.ts';
import { callTool, listTools, type RestAccess } from './tools.ts';

/** MCP requests are JSON-RPC messages; attachments sent through a tool stay under this. */
export const MAX_MCP_BODY_BYTES = 4 * 1024 * 1024;

const INSTRUCTIONS =
  'Email of the connected mailboxes. Start with list_accounts; search_emails finds mail (q: full-text search), get_email reads one (bodies are cut; the note says how to read on), send_email sends, reply by giving reply_to (an email id). Errors are the REST API’s, naming the argument at fault.';

/** The key of an MCP request: MCP clients send bearer tokens; X-API-KEY works as well. */
export function mcpApiKey(c: Context): string | undefined {
  const bearer = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(c.req.header('Authorization') ?? '')?.[1];
  return c.req.header('X-API-KEY') || bearer;
}

/** Answers one MCP POST with a server and transport of its own (stateless). */
async function answer(c: Context<AppEnv>, rest: RestAccess): Promise<Response> {
  const server = new Server(
    { name: 'mailbox-edge', version: '1.0.0' },
    { capabilities: { tools: {} }, instructions: INSTRUCTIONS },
  );
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: listTools() }));
  server.setRequestHandler(CallToolRequestSchema, async ({ params }) => {
    const result = await callTool(params.name, params.arguments ?? {}, rest);
    if (!result) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${params.name}`);
    return result;
  });
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: undefined,
    enableJsonResponse: true,
    maxRequestBodySize: MAX_MCP_BODY_BYTES,
  });
  await server.connect(transport);
  try {
    return await transport.handleRequest(c.req.raw);
  } finally {
    await server.close();
  }
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
      return answer(c, {
        origin: new URL(c.req.url).origin,
        key: mcpApiKey(c)!,
        fetch: async (request) => restFetch(request, c.env, c.executionCtx),
      });
    },
  );
}
