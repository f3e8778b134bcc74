/** The prose of the OpenAPI document: the introduction and what each parameter name means. */

export const API_DESCRIPTION = (
  maxLimit: number,
) => `An email API: connect mailboxes over IMAP/SMTP (Gmail through an app password), read, search, send, draft and organise their mail, and hear about every change through webhooks or the events feed.

**Authentication.** Every \`/api/v1\` request carries \`X-API-KEY\` (except this document and \`/api/v1/docs\`).

**Errors** all have the shape \`{status, type, title, detail}\`; \`detail\` names the parameter or field at fault.

**Lists.** \`limit\` is 1..${maxLimit} (default 100). Offset lists take \`offset\`; cursor lists take the \`cursor\` of the previous page (with the same filters).

**One set of rules.**
- Every JSON body refuses unknown fields with a 400 naming them.
- Enum-valued filters and fields accept any case (\`role=inbox\`, \`trigger_events: ["EMAIL.NEW"]\`); answers use the canonical spelling.
- Ids in query filters that are malformed or unknown find nothing (200, empty list); an id in a path or named by a body that is malformed or unknown is a 404.
- \`provider_id\` is null when the provider has none (IMAP), never \`""\`.

**Events** are delivered to webhook endpoints (see \`webhooks\`, signed with \`X-Email-Engine-Signature\` and the Standard Webhooks headers) and listed by \`GET /api/v1/events\` for 30 days.`;

export const PARAMETER_DOCS: Record<string, string> = {
  limit: `Page size, 1 to 250 (default 100).`,
  offset: 'Items to skip (offset-paged lists).',
  cursor: 'The `cursor` of the previous page; omit for the first page.',
  account_id: 'Only this account (`acc_…`); a malformed or unknown id finds nothing.',
  folder: 'A `fld_…` id, a role name (any case) or the provider path (`Work/2024`).',
  role: 'Emails whose main role is this (any case); a message to oneself is in Inbox and Sent and matches only `SENT`.',
  from: 'Sender address, exact, case-insensitive.',
  to: 'Recipient address (to, cc or bcc), exact, case-insensitive.',
  any_email: 'Sender or any recipient, exact, case-insensitive.',
  thread_id: 'All emails of one conversation (`thr_…`).',
  unread: '`true`: unread only; `false`: read only.',
  starred: '`true`: flagged (IMAP) or starred (Gmail) only.',
  has_attachments: '`true`: with at least one attachment (inline images count).',
  subject: 'Subject contains this text, case-insensitive.',
  after: 'Dated strictly after this ISO 8601 instant.',
  before: 'Dated strictly before this ISO 8601 instant.',
  q: 'Search text: every word must appear (subject, body, participants). For contacts: part of the address or name.',
  include_headers:
    '`true` adds every header to each email. Headers are read from the raw sources: a page holds the emails whose headers one request reads (it may hold fewer than `limit`; follow `cursor`).',
  endpoint_id: 'The endpoint (`we_…`) whose calls to list; required.',
  event_id: 'Only the calls of this event (`evt_…`).',
};

export const PATH_PARAMETER_DOCS: Record<string, string> = {
  id: 'The id of the resource (its prefix names its kind).',
  account_id: 'The account (`acc_…`).',
  email_id: 'The email (`email_…`).',
  scheduled_id: 'The scheduled send (`sch_…`).',
  folder_id: 'The folder (`fld_…`).',
  attachment_id: 'The attachment (`att_…`).',
  tracking_id: 'The tracking id (`trk_…`).',
};
