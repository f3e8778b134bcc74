/**
 * The MCP tools: each is one REST operation (its arguments and their rules are the operation's,
 * arguments.ts), called with the caller's key through the app itself, and its answer shaped for a
 * model (present.ts). Refusals are the REST API's, as tool errors.
 */
import type { CallToolResult, Tool, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { ApiError, errorBody, type ErrorBody } from '../lib/errors.ts';
import { intParam, parseOrThrow } from '../lib/validation.ts';
import { operationInput, restRequest, type ObjectSchema, type OperationInput } from './arguments.ts';
import { BODY_TEXT_LIMIT, count, emailSummary, emailText, THREAD_BODY_LIMIT } from './present.ts';

type Json = Record<string, any>;

interface ToolDefinition {
  name: string;
  title: string;
  description: string;
  /** The REST operation the tool calls (operationId of the OpenAPI document). */
  operation: string;
  annotations: ToolAnnotations;
  /** Arguments of the tool's own (not the operation's), validated here. */
  own?: { schema: z.ZodObject; properties: Record<string, Json> };
  /** The structured result and a one-line summary of it, from the REST answer. */
  present(answer: Json, own: Json): { result: Json; summary: string };
}

const READ: ToolAnnotations = { readOnlyHint: true, openWorldHint: false };
/** Changes the mailbox, undoably (flags and folders can be set back). */
const CHANGE: ToolAnnotations = { readOnlyHint: false, destructiveHint: false, openWorldHint: false };
const more = (answer: Json, how: string) => (answer.has_more ? `; more with ${how}` : '');
const passThrough = (noun: string, how: string) => (answer: Json) => ({
  result: answer,
  summary: `${count(answer.data.length, noun)}${more(answer, how)}`,
});

const bodyOffset = intParam(0).optional();

const DEFINITIONS: ToolDefinition[] = [
  {
    name: 'list_accounts',
    title: 'List mail accounts',
    description: 'The connected mailboxes (id, address, status). Other tools take an account_id from here.',
    operation: 'listAccounts',
    annotations: READ,
    present: passThrough('account', 'offset'),
  },
  {
    name: 'list_folders',
    title: 'List folders',
    description: "An account's folders: id, name, role (INBOX, SENT, DRAFTS, TRASH, …) and provider path.",
    operation: 'listFolders',
    annotations: READ,
    present: passThrough('folder', ''),
  },
  {
    name: 'search_emails',
    title: 'Search emails',
    description:
      'Emails newest first, filtered (every filter of GET /emails; `q` is full-text search: every word must appear). Items carry a snippet, not the body: read one with get_email. Pages: pass the returned `cursor` with the same filters.',
    operation: 'listEmails',
    annotations: READ,
    present: (answer) => ({
      result: { emails: answer.data.map(emailSummary), has_more: answer.has_more, cursor: answer.cursor },
      summary: `${count(answer.data.length, 'email')}${more(answer, `cursor "${answer.cursor}"`)}`,
    }),
  },
  {
    name: 'get_email',
    title: 'Read an email',
    description: `One email: headers, attachments (listed, not inlined) and its body as text (HTML reduced to text), at most ${BODY_TEXT_LIMIT} characters per call; \`body_offset\` reads on from where the note says.`,
    operation: 'getEmail',
    annotations: READ,
    own: {
      schema: z.object({ body_offset: bodyOffset }),
      properties: {
        body_offset: {
          type: 'integer',
          minimum: 0,
          description: `Where the body text starts (characters); the next part of a cut body. Default 0.`,
        },
      },
    },
    present: (answer, own) => {
      const result = emailText(answer as never, own.body_offset);
      return { result, summary: `${result.subject || '(no subject)'}, from ${result.from}, ${result.date}` };
    },
  },
  {
    name: 'get_thread',
    title: 'Read a conversation',
    description: `The conversation of an email, oldest first (drafts left out), each message as text cut at ${THREAD_BODY_LIMIT} characters.`,
    operation: 'getThread',
    annotations: READ,
    present: (answer) => ({
      result: {
        thread_id: answer.id,
        emails: answer.data.map((email: never) => emailText(email, 0, THREAD_BODY_LIMIT)),
        has_more: answer.has_more,
      },
      summary: `${count(answer.data.length, 'email')} in the conversation${answer.has_more ? ' (more: raise limit, or search_emails with its thread_id)' : ''}`,
    }),
  },
  {
    name: 'send_email',
    title: 'Send an email',
    description:
      'Sends from the account through its SMTP server (the POST /emails fields). To answer an email, give its id as `reply_to`: recipients, Re: subject and threading follow. `idempotency_key` makes a retry safe: a repeat sends nothing and returns the first result.',
    operation: 'sendEmail',
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    present: (answer) => ({ result: answer, summary: `Sent: ${answer.message_id}` }),
  },
  {
    name: 'create_draft',
    title: 'Save a draft',
    description: "Saves a draft in the account's Drafts folder (the send_email fields; recipients optional).",
    operation: 'createDraft',
    annotations: { ...CHANGE, idempotentHint: false },
    present: (answer) => ({ result: answer, summary: `Draft saved: ${answer.draft_id}` }),
  },
  {
    name: 'update_email',
    title: 'Mark read/unread, star, or move an email',
    description:
      'Sets `unread`, `starred` and/or `folders` (the complete new folder set: ids, role names or paths) in the mailbox.',
    operation: 'modifyEmail',
    annotations: { ...CHANGE, idempotentHint: true },
    present: (answer) => {
      const { body: _body, ...result } = emailText(answer as never, 0, 0);
      return { result, summary: `Updated: ${result.unread ? 'unread' : 'read'}, in ${result.folders.join(', ')}` };
    },
  },
  {
    name: 'trash_email',
    title: 'Move an email to Trash',
    description: 'Moves the email to the Trash folder; the provider deletes it when the trash is emptied.',
    operation: 'trashEmail',
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    present: (answer) => ({ result: answer, summary: `Moved to Trash: ${answer.id}` }),
  },
  {
    name: 'list_contacts',
    title: 'List contacts',
    description: 'The people the accounts email with, most recent first; `q` matches part of an address or name.',
    operation: 'listContacts',
    annotations: READ,
    present: (answer) => ({
      result: answer,
      summary: `${count(answer.data.length, 'contact')}${more(answer, `cursor "${answer.cursor}"`)}`,
    }),
  },
];

interface ReadyTool extends ToolDefinition {
  input: OperationInput;
  inputSchema: ObjectSchema;
}

let ready: Map<string, ReadyTool> | undefined;

/** The tools with their input schemas (built once per isolate, from the OpenAPI document). */
function tools(): Map<string, ReadyTool> {
  ready ??= new Map(
    DEFINITIONS.map((d) => {
      const input = operationInput(d.operation);
      const inputSchema = { ...input.schema, properties: { ...input.schema.properties, ...d.own?.properties } };
      return [d.name, { ...d, input, inputSchema }];
    }),
  );
  return ready;
}

/** The tools as `tools/list` answers them. */
export function listTools(): Tool[] {
  return [...tools().values()].map((t) => ({
    name: t.name,
    title: t.title,
    description: t.description,
    inputSchema: t.inputSchema,
    annotations: { title: t.title, ...t.annotations },
  }));
}

function toolError(error: ErrorBody): CallToolResult {
  return { isError: true, content: [{ type: 'text', text: error.detail }], structuredContent: { error } };
}

/** How a tool reaches the REST API: a request to the app, with the caller's key. */
export interface RestAccess {
  origin: string;
  key: string;
  fetch(request: Request): Promise<Response>;
}

/** Runs a tool; null for a tool that does not exist. */
export async function callTool(
  name: string,
  args: Record<string, unknown>,
  rest: RestAccess,
): Promise<CallToolResult | null> {
  const tool = tools().get(name);
  if (!tool) return null;
  try {
    const ownNames = Object.keys(tool.own?.properties ?? {});
    const own = tool.own
      ? parseOrThrow(tool.own.schema, Object.fromEntries(ownNames.map((n) => [n, stringified(args[n])])))
      : {};
    const forRest = Object.fromEntries(Object.entries(args).filter(([n]) => !ownNames.includes(n)));
    const response = await rest.fetch(restRequest(tool.input, forRest, rest.origin, rest.key));
    const answer = (await response.json()) as Json;
    if (!response.ok) return toolError(answer as ErrorBody);
    const { result, summary } = tool.present(answer, own);
    return {
      content: [
        { type: 'text', text: summary },
        { type: 'text', text: JSON.stringify(result) },
      ],
      structuredContent: result,
    };
  } catch (err) {
    if (err instanceof ApiError) return toolError(errorBody(err.kind, err.detail));
    throw err;
  }
}

/** Own arguments are checked with the query-string rules (intParam): numbers arrive as their spelling. */
const stringified = (value: unknown) => (typeof value === 'number' ? String(value) : value);
