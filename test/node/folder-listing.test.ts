// The folder list a session reports (gateway/poll.ts FolderListing): the Worker deletes a folder only
// when a second listing confirms it is gone, so a listing that may lack a folder the Worker holds is
// always followed by one more, even when nothing changed.
import { describe, expect, it } from 'vitest';
import type { FolderInfo } from '../../common/relay.ts';
import type { ListResponse } from 'imapflow';
import { toFolderInfo } from '../../gateway/imap.ts';
import { FolderListing } from '../../gateway/poll.ts';

const folder = (path: string): FolderInfo => ({
  path,
  delimiter: '/',
  flags: [],
  special_use: null,
  uidvalidity: 1,
  uidnext: 1,
  highest_modseq: null,
  total: 0,
});

describe('the folder listing', () => {
  it("sends the listing after a session's first one, then only changes", () => {
    const listing = new FolderListing();
    // A folder deleted while no session ran, or as this one began, is missing from its first listing.
    listing.start([folder('INBOX'), folder('Sent')]);
    expect(listing.update([folder('INBOX'), folder('Sent')])).toBe(true);
    expect(listing.update([folder('INBOX'), folder('Sent')])).toBe(false);
  });

  it('sends the listing after one that lost a folder', () => {
    const listing = new FolderListing();
    listing.start([folder('INBOX'), folder('Old')]);
    listing.update([folder('INBOX'), folder('Old')]);
    expect(listing.update([folder('INBOX')])).toBe(true);
    expect(listing.removed).toEqual(['Old']);
    expect(listing.update([folder('INBOX')])).toBe(true);
    expect(listing.update([folder('INBOX')])).toBe(false);
  });

  it('does not send a listing that differs only by \\Marked or \\Unmarked (they come and go with new mail)', () => {
    const entry = (path: string, flags: string[]) =>
      toFolderInfo({
        path,
        delimiter: '/',
        flags: new Set(['\\HasNoChildren', ...flags]),
        status: { path, messages: 0, uidNext: 1, uidValidity: 7n, highestModseq: 1n },
      } as unknown as ListResponse);
    const listing = new FolderListing();
    listing.start([entry('INBOX', []), entry('Sent', [])]);
    listing.update([entry('INBOX', []), entry('Sent', [])]);
    expect(listing.update([entry('INBOX', ['\\Marked']), entry('Sent', ['\\UnMarked'])])).toBe(false);
    expect(entry('Sent', ['\\UnMarked']).flags).toEqual(['\\HasNoChildren']);
    // A real change still goes.
    expect(listing.update([entry('INBOX', []), entry('Sent', ['\\Noselect'])])).toBe(true);
  });
});
