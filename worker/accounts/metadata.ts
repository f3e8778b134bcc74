/** An account's `metadata`: any JSON object the client attaches, at most 16 KB once serialised. */
import { z } from 'zod';

const MAX_METADATA_BYTES = 16 * 1024;

export const AccountMetadata = z
  .record(z.string(), z.unknown())
  .refine((value) => new TextEncoder().encode(JSON.stringify(value)).byteLength <= MAX_METADATA_BYTES, {
    message: 'must be at most 16 KB of JSON',
  });
