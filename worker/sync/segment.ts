/**
 * Where a change's new bytes go in R2. `Segment`: the sources, large bodies and attachments of all
 * the change's new emails in one object, written with one R2 call, each referred to by its byte
 * range (emails/blobs.ts). `SeparateObjects`: one object per blob, for messages whose source was
 * staged (the staged object stays their raw source, so their other blobs cannot share its lifetime
 * through a segment).
 */
import { sha256Hex } from '../../common/crypto.ts';
import { segmentRef } from '../emails/blobs.ts';
import { blobKeys } from '../emails/store.ts';
import type { ChangeResult } from './state.ts';

export interface BlobWriter {
  /** Whether blobs get objects (and keys) of their own; a segment needs none. */
  readonly ownKeys: boolean;
  /** Keeps `body`; answers the reference to store. `key`: its own object's key, when it gets one. */
  put(key: string, body: Uint8Array | string, contentType: string): string;
}

const utf8 = new TextEncoder();

export class Segment implements BlobWriter {
  readonly ownKeys = false;
  readonly key: string;
  private parts: Uint8Array[] = [];
  private size = 0;

  private constructor(key: string) {
    this.key = key;
  }

  /**
   * The segment of a change, named by what it holds (account, folder, UIDVALIDITY and the UIDs of
   * its new messages), so a retried change rewrites the same object.
   */
  static async of(accountId: string, folderId: string, uidvalidity: number, uids: number[]): Promise<Segment> {
    const digest = await sha256Hex(`${accountId}\n${folderId}\n${uidvalidity}\n${uids.join(',')}`);
    return new Segment(blobKeys.segment(accountId, digest.slice(0, 40)));
  }

  put(_key: string, body: Uint8Array | string): string {
    const bytes = typeof body === 'string' ? utf8.encode(body) : body;
    const ref = segmentRef(this.key, this.size, bytes.byteLength);
    this.parts.push(bytes);
    this.size += bytes.byteLength;
    return ref;
  }

  /** Adds the segment to the change's R2 writes (one object), when anything went into it. */
  close(result: ChangeResult): void {
    if (this.parts.length === 0) return;
    const body = new Uint8Array(this.size);
    let offset = 0;
    for (const part of this.parts) {
      body.set(part, offset);
      offset += part.byteLength;
    }
    result.blobs.push({ key: this.key, body, contentType: 'application/octet-stream' });
    this.parts = [];
  }
}

export class SeparateObjects implements BlobWriter {
  readonly ownKeys = true;
  private readonly result: ChangeResult;

  constructor(result: ChangeResult) {
    this.result = result;
  }

  put(key: string, body: Uint8Array | string, contentType: string): string {
    this.result.blobs.push({ key, body, contentType });
    return key;
  }
}
