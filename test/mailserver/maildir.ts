/**
 * Fills a folder straight through its maildir, as a delivery agent would: Dovecot numbers the
 * messages when the folder is next opened. APPEND takes tens of minutes for 100,000 messages; this
 * takes seconds. The folder must exist (create it over IMAP first).
 */
import { chownSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { MailServer } from './mailserver.ts';

export function fillMaildir(
  mail: MailServer,
  user: string,
  folder: string,
  count: number,
  message: (i: number) => string | Buffer,
): void {
  const dir = join(mail.maildirOf(user, folder), 'new');
  const owner = statSync(dir);
  for (let i = 0; i < count; i++) {
    const file = join(dir, `${1_700_000_000 + i}.M${i}P1.fill`);
    writeFileSync(file, message(i));
    chownSync(file, owner.uid, owner.gid);
  }
}
