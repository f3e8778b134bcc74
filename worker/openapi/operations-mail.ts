/** The mail operations: folders, emails, drafts, contacts. */
import { ContactListQuery } from '../contacts/list.ts';
import { DraftListQuery, EmailListQuery } from '../emails/query.ts';
import { ModifyBody } from '../routes/actions.ts';
import { FolderListQuery } from '../routes/folders.ts';
import { ThreadQuery } from '../routes/threads.ts';
import { Contacts } from '../schemas/accounts.ts';
import { DraftCreated, Drafts, Email, EmailDeleted, Emails, EmailSent, Thread } from '../schemas/emails.ts';
import { CreateFolderBody, Folder, FolderDeleted, Folders, UpdateFolderBody } from '../schemas/folders.ts';
import { ComposeBody } from '../send/compose.ts';
import { ScheduledListQuery } from '../routes/scheduled.ts';
import { EmailScheduled, ScheduledEmail, ScheduledEmailCancelled, ScheduledEmails } from '../schemas/scheduled.ts';
import type { Operation } from './operation.ts';

const sendExample = {
  account_id: 'acc_01JD8Z6Q3W4E5R6T7Y8V9K0P1A',
  to: [{ identifier: 'ann@example.com', display_name: 'Ann' }],
  subject: 'Lunch on Friday?',
  body: '<p>Are you free on Friday?</p>',
  tracking_options: { opens: true, clicks: true, label: 'lunch' },
};

export const MAIL_OPERATIONS: Operation[] = [
  // Folders
  {
    method: 'get',
    path: '/folders',
    operationId: 'listFolders',
    tag: 'Folders',
    summary: "List an account's folders",
    query: FolderListQuery,
    ok: Folders,
    errors: [400],
  },
  {
    method: 'get',
    path: '/{account_id}/folders/{folder_id}',
    operationId: 'getFolder',
    tag: 'Folders',
    summary: 'Get a folder',
    ok: Folder,
    errors: [404],
  },
  {
    method: 'post',
    path: '/{account_id}/folders',
    operationId: 'createFolder',
    tag: 'Folders',
    summary: 'Create a folder',
    description:
      "Created on the mail server (under `parent_id`, joined with the server's hierarchy delimiter), then answered with the folder; `email.folder.create` follows once. A name that exists is a 409; a name the server refuses is a 400 with its reason.",
    body: { schema: CreateFolderBody, name: 'CreateFolderRequest', example: { name: 'Projects' } },
    ok: Folder,
    okStatus: 201,
    errors: [400, 404, 409, 502],
  },
  {
    method: 'put',
    path: '/{account_id}/folders/{folder_id}',
    operationId: 'updateFolder',
    tag: 'Folders',
    summary: 'Rename or move a folder',
    description:
      'Renamed on the mail server (its subfolders move with it); the folder keeps its `fld_` id and its emails keep theirs. `email.folder.update` follows once, with no email events. INBOX and folders with a role cannot be renamed (400).',
    body: { schema: UpdateFolderBody, name: 'UpdateFolderRequest', example: { name: 'Projects 2026' } },
    ok: Folder,
    errors: [400, 404, 409, 502],
  },
  {
    method: 'delete',
    path: '/{account_id}/folders/{folder_id}',
    operationId: 'deleteFolder',
    tag: 'Folders',
    summary: 'Delete a folder',
    description:
      'Deleted on the mail server with its messages (on Gmail: the label only; the mail stays in All Mail). `email.folder.delete` follows once; an email left in no folder gets `email.delete`, one still in another folder `email.update`. INBOX, folders with a role and folders with subfolders cannot be deleted (400).',
    ok: FolderDeleted,
    errors: [400, 404, 502],
  },
  // Emails
  {
    method: 'get',
    path: '/emails',
    operationId: 'listEmails',
    tag: 'Emails',
    summary: 'List and search emails',
    description:
      'Newest first by date. Every filter combines with the others; without `account_id`, every account. Drafts are included (role `DRAFTS`) unless a filter excludes them.',
    query: EmailListQuery,
    ok: Emails,
    errors: [400],
  },
  {
    method: 'post',
    path: '/emails',
    operationId: 'sendEmail',
    tag: 'Emails',
    summary: 'Send an email',
    description:
      "Sent from the account's address through its SMTP server; the copy lands in Sent and `email.new` follows with `origin: api`. At least one recipient unless `reply_to` is set (then recipients, `Re:` subject and threading headers are filled in). With `send_at` (ISO 8601, 5 s to 30 days ahead) the email is scheduled instead: 202 `EmailScheduled`, sent at that time through the same path (listed at `GET /emails/scheduled`, cancelled with `DELETE`). With `draft_id`, the saved draft is sent (its recipients, subject, bodies and attachments, each overridable by the request's fields) and removed from Drafts; `email.draft.delete` follows. Up to 30 MB.",
    body: { schema: ComposeBody, name: 'SendEmailRequest', multipart: true, example: sendExample },
    ok: EmailSent,
    accepted: EmailScheduled,
    errors: [400, 404, 409, 422, 502],
    idempotent: true,
  },
  {
    method: 'get',
    path: '/emails/scheduled',
    operationId: 'listScheduledEmails',
    tag: 'Emails',
    summary: 'List scheduled sends',
    description: 'Newest first; without `account_id`, every account. Ended ones are listed for 30 days.',
    query: ScheduledListQuery,
    ok: ScheduledEmails,
    errors: [400],
  },
  {
    method: 'get',
    path: '/emails/scheduled/{scheduled_id}',
    operationId: 'getScheduledEmail',
    tag: 'Emails',
    summary: 'Get a scheduled send',
    ok: ScheduledEmail,
    errors: [404],
  },
  {
    method: 'delete',
    path: '/emails/scheduled/{scheduled_id}',
    operationId: 'cancelScheduledEmail',
    tag: 'Emails',
    summary: 'Cancel a scheduled send',
    description:
      'Only while its status is `scheduled`: it then never goes out. Once `sending`, `sent`, `failed` or `cancelled`: 409 saying which. A cancel at the send time either wins (never sent) or gets the 409.',
    ok: ScheduledEmailCancelled,
    errors: [404, 409],
  },
  {
    method: 'get',
    path: '/emails/{email_id}',
    operationId: 'getEmail',
    tag: 'Emails',
    summary: 'Get an email',
    ok: Email,
    errors: [404],
  },
  {
    method: 'put',
    path: '/emails/{email_id}',
    operationId: 'modifyEmail',
    tag: 'Emails',
    summary: 'Mark read or unread, star, or move an email',
    description:
      'Carried out in the mailbox, then answered with the updated email; `email.update` follows. `folders` is the complete new folder set (a move replaces it; Gmail labels are added and removed).',
    body: { schema: ModifyBody, name: 'ModifyEmailRequest', example: { unread: false, folders: ['Archive'] } },
    ok: Email,
    errors: [400, 404, 502],
  },
  {
    method: 'delete',
    path: '/emails/{email_id}',
    operationId: 'trashEmail',
    tag: 'Emails',
    summary: 'Move an email to Trash',
    description: 'It stays with role `TRASH` until the provider empties the trash; then `email.delete` follows.',
    ok: EmailDeleted,
    errors: [404, 502],
  },
  {
    method: 'get',
    path: '/emails/{email_id}/raw',
    operationId: 'getEmailRaw',
    tag: 'Emails',
    summary: 'Download the RFC 822 source',
    ok: { mediaType: 'message/rfc822', description: 'The whole message as received.' },
    errors: [404],
  },
  {
    method: 'get',
    path: '/emails/{email_id}/attachments/{attachment_id}',
    operationId: 'getAttachment',
    tag: 'Emails',
    summary: 'Download an attachment',
    ok: {
      mediaType: 'application/octet-stream',
      description: "The attachment's bytes, with its own Content-Type and a Content-Disposition filename.",
    },
    errors: [404],
  },
  {
    method: 'get',
    path: '/{account_id}/emails/{email_id}',
    operationId: 'getAccountEmail',
    tag: 'Emails',
    summary: 'Get an email of an account',
    ok: Email,
    errors: [404],
  },
  {
    method: 'get',
    path: '/{account_id}/emails/{email_id}/thread',
    operationId: 'getThread',
    tag: 'Emails',
    summary: "Get an email's conversation",
    description:
      'Oldest first; Sent copies included, drafts left out. Each email comes with its headers, read from its raw source: a long conversation whose emails need more reads than one request makes ends early with `has_more` (`GET /emails?thread_id=` lists them all, with a cursor).',
    query: ThreadQuery,
    ok: Thread,
    errors: [400, 404],
  },
  {
    method: 'post',
    path: '/{account_id}/emails/{email_id}/unread',
    operationId: 'markUnread',
    tag: 'Emails',
    summary: 'Mark an email unread',
    ok: Email,
    errors: [404, 502],
  },
  {
    method: 'post',
    path: '/{account_id}/emails/{email_id}/read',
    operationId: 'markRead',
    tag: 'Emails',
    summary: 'Mark an email read',
    ok: Email,
    errors: [404, 502],
  },
  // Drafts
  {
    method: 'post',
    path: '/drafts',
    operationId: 'createDraft',
    tag: 'Drafts',
    summary: 'Save a draft',
    description:
      "Saved in the account's Drafts folder; `email.draft.new` follows when it syncs. The same fields as sending; recipients are optional.",
    body: {
      schema: ComposeBody,
      name: 'CreateDraftRequest',
      multipart: true,
      example: { ...sendExample, tracking_options: undefined },
    },
    ok: DraftCreated,
    errors: [400, 404, 409, 422, 502],
    idempotent: true,
  },
  {
    method: 'get',
    path: '/drafts',
    operationId: 'listDrafts',
    tag: 'Drafts',
    summary: 'List drafts',
    query: DraftListQuery,
    ok: Drafts,
    errors: [400],
  },
  // Contacts
  {
    method: 'get',
    path: '/contacts',
    operationId: 'listContacts',
    tag: 'Contacts',
    summary: 'List the people the accounts email with',
    description:
      "From, to, cc and bcc of synced mail, most recent first; the account's own address is left out. Without `account_id`, every account (a person appears once per account).",
    query: ContactListQuery,
    ok: Contacts,
    errors: [400],
  },
];
