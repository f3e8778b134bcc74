// The folder list a session reports (gateway/poll.ts FolderListing): the Worker deletes a folder only
// when a second listing confirms it is gone, so a listing that may lack a folder the Worker holds is
// always followed by one more, even when nothing changed.
import { describe, expect, it } from 'vitest';
import type { FolderInfo } from '../../common/relay.ts';
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
});
