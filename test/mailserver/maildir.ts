/**
 * Fills a folder straight through its maildir, as a delivery agent would: Dovecot numbers the
 * messages when the folder is next opened. APPEND takes tens of minutes for 100,000 messages; this
 * takes seconds. The folder must exist (create it over IMAP first). Each file is written in `tmp/`
 * and renamed into `new/`, as maildir delivery goes, so a server reading the folder meanwhile never
 * sees a half-written message (and may move it to `cur/` at once).
 */
import { chownSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { MailServer } from './mailserver.ts';

export function fillMaildir(
  mail: MailServer,
  user: string,
  folder: string,
  count: number,
  message: (i: number) => string | Buffer,
): void {
  const maildir = mail.maildirOf(user, folder);
  const owner = statSync(join(maildir, 'new'));
  for (let i = 0; i < count; i++) {
    const name = `${1_700_000_000 + i}.M${i}P1.fill`;
    const staging = join(maildir, 'tmp', name);
    writeFileSync(staging, message(i));
    chownSync(staging, owner.uid, owner.gid);
    renameSync(staging, join(maildir, 'new', name));
  }
}
