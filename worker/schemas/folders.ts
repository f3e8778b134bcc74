/** The Folder object and the role values (spec: Folder). */
import { z } from 'zod';
import { idOf } from './common.ts';

export const ROLES = [
  'INBOX',
  'SENT',
  'DRAFTS',
  'TRASH',
  'SPAM',
  'ARCHIVE',
  'ALL',
  'IMPORTANT',
  'STARRED',
  'UNKNOWN',
] as const;
export type Role = (typeof ROLES)[number];

export const RoleSchema = z.enum(ROLES).meta({
  id: 'Role',
  description: "A folder's role (special use); `UNKNOWN` for folders without one. Filters accept any case.",
});

export const Folder = z
  .strictObject({
    object: z.literal('Folder'),
    id: idOf('folder'),
    account_id: idOf('account'),
    name: z.string().meta({ description: 'The last segment of the path.' }),
    role: RoleSchema,
    parent_id: idOf('folder').nullable(),
    total_count: z.int().meta({ description: "The folder's message count on the server at the last sync." }),
    provider_id: z.string().meta({ description: 'The full provider path (IMAP mailbox name), e.g. `Work/2024`.' }),
  })
  .meta({ id: 'Folder' });
export type Folder = z.output<typeof Folder>;

export const Folders = z.strictObject({ object: z.literal('Folders'), data: z.array(Folder) }).meta({ id: 'Folders' });

const FolderName = z.string().meta({
  description:
    "One segment of the path (the server's hierarchy delimiter joins it to its parent): not empty, without the delimiter, `*`, `%` or control characters. Any Unicode (modified UTF-7 on the wire).",
});

export const CreateFolderBody = z.strictObject({
  name: FolderName,
  parent_id: z
    .string()
    .nullable()
    .optional()
    .meta({ description: 'The folder to create it in; none: at the top level.' }),
});

export const UpdateFolderBody = z.strictObject({
  name: FolderName.optional(),
  parent_id: z
    .string()
    .nullable()
    .optional()
    .meta({ description: 'Move it into this folder; `null`: to the top level; absent: where it is.' }),
});

export const FolderDeleted = z
  .strictObject({ object: z.literal('FolderDeleted'), id: idOf('folder') })
  .meta({ id: 'FolderDeleted' });
