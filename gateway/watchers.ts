/**
 * Which folders get an IDLE connection of their own. By default one: INBOX (Gmail: All Mail, where
 * every message shows up); more (special-use folders) only when the operator raises
 * GATEWAY_MAX_EXTRA_IDLE. Every other folder is polled on the command connection.
 */
import type { FolderInfo } from '../common/relay.ts';
import { isSelectable } from './imap.ts';

/** The folders to IDLE on, first the primary one, then up to `maxExtra` special-use folders. */
export function chooseWatched(folders: FolderInfo[], gmail: boolean, maxExtra: number): string[] {
  const selectable = folders.filter(isSelectable);
  const inbox = selectable.find((f) => f.path.toUpperCase() === 'INBOX');
  const allMail = gmail ? selectable.find((f) => f.special_use === '\\All') : undefined;
  const primary = allMail ?? inbox;
  const order = ['\\Sent', '\\Drafts', '\\Trash', '\\Junk', '\\Archive', '\\All'];
  const others = [
    ...(inbox && inbox !== primary ? [inbox] : []),
    ...order.flatMap((use) => selectable.filter((f) => f.special_use === use && f !== inbox && f !== primary)),
  ];
  return [...(primary ? [primary] : []), ...others.slice(0, maxExtra)].map((f) => f.path);
}

/** On Gmail a new message shows in All Mail and in its labels at once: a notification of All Mail also looks at INBOX. */
export function alsoWake(path: string, folders: Map<string, FolderInfo>, gmail: boolean): string[] {
  if (!gmail || folders.get(path)?.special_use !== '\\All') return [];
  return [...folders.keys()].filter((p) => p.toUpperCase() === 'INBOX');
}
