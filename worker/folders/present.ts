/** The Folder object (spec: Folder) and how IMAP folders get their roles. */
import type { FolderInfo } from '../../common/relay.ts';
import type { Folder, Role } from '../schemas/folders.ts';

export interface FolderRow {
  id: string;
  account_id: string;
  provider_id: string;
  name: string;
  role: string;
  parent_id: string | null;
  delimiter: string | null;
  total_count: number;
}

export function presentFolder(row: FolderRow): Folder {
  return {
    object: 'Folder' as const,
    id: row.id,
    account_id: row.account_id,
    name: row.name,
    role: row.role as Role,
    parent_id: row.parent_id,
    total_count: row.total_count,
    provider_id: row.provider_id,
  };
}

const SPECIAL_USE_ROLES: Record<string, Role> = {
  '\\inbox': 'INBOX',
  '\\sent': 'SENT',
  '\\drafts': 'DRAFTS',
  '\\trash': 'TRASH',
  '\\junk': 'SPAM',
  '\\archive': 'ARCHIVE',
  '\\all': 'ALL',
  '\\important': 'IMPORTANT',
  '\\flagged': 'STARRED',
};

export function roleOf(folder: Pick<FolderInfo, 'path' | 'special_use'>): Role {
  if (folder.path.toUpperCase() === 'INBOX') return 'INBOX';
  return (folder.special_use && SPECIAL_USE_ROLES[folder.special_use.toLowerCase()]) || 'UNKNOWN';
}

/** The last segment of an IMAP path. */
export function folderName(path: string, delimiter: string | null): string {
  if (!delimiter) return path;
  const parts = path.split(delimiter);
  return parts[parts.length - 1] || path;
}

export function parentPath(path: string, delimiter: string | null): string | null {
  if (!delimiter) return null;
  const at = path.lastIndexOf(delimiter);
  return at > 0 ? path.slice(0, at) : null;
}

/**
 * An email's main role when it sits in several folders: the most specific wins, so a message to
 * oneself (Inbox and Sent) is SENT, anything in Trash is TRASH, and Gmail's All Mail only counts
 * when nothing else does.
 */
const ROLE_PRIORITY: Role[] = [
  'TRASH',
  'SPAM',
  'DRAFTS',
  'SENT',
  'INBOX',
  'ARCHIVE',
  'UNKNOWN',
  'IMPORTANT',
  'STARRED',
  'ALL',
];

export function mainRole(roles: string[]): Role {
  for (const role of ROLE_PRIORITY) if (roles.includes(role)) return role;
  return 'UNKNOWN';
}
