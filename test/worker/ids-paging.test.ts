import { describe, expect, it } from 'vitest';
import { derivedId, newId, parseId } from '../../worker/lib/ids.ts';
import { decodeCursor, encodeCursor } from '../../worker/lib/paging.ts';
import { ApiError } from '../../worker/lib/errors.ts';

describe('typed ids', () => {
  it('are a prefix plus 26 Crockford base32 characters, ordered by time', () => {
    const a = newId('email', 1_700_000_000_000);
    const b = newId('email', 1_700_000_000_001);
    expect(a).toMatch(/^email_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(a < b).toBe(true);
  });

  it('parse only ids of the right kind and shape', () => {
    const id = newId('account');
    expect(parseId('account', id)).toBe(id);
    expect(parseId('email', id)).toBeNull();
    expect(parseId('account', 'acc_short')).toBeNull();
    expect(parseId('account', id.slice(0, -1) + 'U')).toBeNull(); // U is not Crockford
    expect(parseId('account', id.toLowerCase())).toBeNull();
    expect(parseId('account', undefined)).toBeNull();
  });

  it('derive the same id from the same key', async () => {
    expect(await derivedId('thread', 'gm:123')).toBe(await derivedId('thread', 'gm:123'));
    expect(await derivedId('thread', 'gm:123')).not.toBe(await derivedId('thread', 'gm:124'));
    expect(parseId('thread', await derivedId('thread', 'x'))).not.toBeNull();
  });
});

describe('cursors', () => {
  it('round-trip a position and are bound to their filters', () => {
    const cursor = encodeCursor([1700000000000, 'email_X'], 'account_id=a');
    expect(decodeCursor(cursor, 'account_id=a')).toEqual([1700000000000, 'email_X']);
    expect(() => decodeCursor(cursor, 'account_id=b')).toThrow(ApiError);
    expect(() => decodeCursor('garbage!', 'account_id=a')).toThrow(/cursor/);
  });
});
