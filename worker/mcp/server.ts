/**
 * One MCP request answered by the SDK's Streamable HTTP transport, with a server and transport of its
 * own (stateless), as JSON. The SDK's low-level Server is used rather than McpServer: McpServer
 * validates arguments with its own schemas and words, while here the REST routes judge them, so that
 * the refusals are theirs (tools.ts).
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { callTool, listTools, type RestAccess } from './tools.ts';

const INSTRUCTIONS =
  'Email of the connected mailboxes. Start with list_accounts; search_emails finds mail (q: full-text search), get_email reads one (bodies are cut; the note says how to read on), send_email sends, reply by giving reply_to (an email id). Errors are the REST API’s, naming the argument at fault.';

/** A JSON-RPC error answer, as the transport gives its own. */
function jsonRpcError(status: number, code: number, message: string): Response {
  return Response.json({ jsonrpc: '2.0', error: { code, message }, id: null }, { status });
}

/**
 * Answers one MCP POST (its key already checked, its size limited). One message per request: MCP
 * 2025-06-18 dropped JSON-RPC batches, and a batch of tool calls would multiply what one invocation
 * asks of D1 and R2 past Cloudflare's per-invocation limits.
 */
export async function answer(request: Request, rest: RestAccess): Promise<Response> {
  // Read outside the try: a body over the size limit fails here, and the route's limit answers 413.
  const text = await request.text();
  let message: unknown;
  try {
    message = JSON.parse(text);
  } catch {
    return jsonRpcError(400, ErrorCode.ParseError, 'Parse error: Invalid JSON');
  }
  if (Array.isArray(message))
    return jsonRpcError(400, ErrorCode.InvalidRequest, 'Invalid Request: send one JSON-RPC message per request');

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
  });
  await server.connect(transport);
  try {
    return await transport.handleRequest(request, { parsedBody: message });
  } finally {
    await server.close();
  }
}
