/**
 * The local D1 files of a `npm start` state folder (wrangler dev --persist-to), told apart by the
 * binding each is: DB (the directory and the first mail shard), MAIL_DB_2, … with MAIL_SHARDS.
 */
import { createHash, createHmac } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { mailShardBindings } from '../../scripts/mail-shards.mjs';

export const DIRECTORY = 'DB';
/** Every mail shard binding `npm start` can make (MAIL_SHARDS up to 64). */
const SHARD_BINDINGS = mailShardBindings(64);

/** Where miniflare keeps the local D1 files of a state folder. */
export const d1Folder = (stateDir: string) => join(stateDir, 'v3', 'd1', 'miniflare-D1DatabaseObject');

/**
 * The file name miniflare gives a local D1 database: its Durable Object id for the database id, which
 * for a binding without `database_id` (wrangler.toml, and the shards npm start adds) is the binding.
 * SQLite's `-wal` and `-shm` files beside it share the name.
 */
export function d1FileName(databaseId: string): string {
  const key = createHash('sha256').update('miniflare-D1DatabaseObject').digest();
  const name = createHmac('sha256', key).update(databaseId).digest().subarray(0, 16);
  const check = createHmac('sha256', key).update(name).digest().subarray(0, 16);
  return `${Buffer.concat([name, check]).toString('hex')}.sqlite`;
}

/** The local D1 files of a state folder by binding, DB first; a file that is no known binding is an error, not a guess. */
export function openD1Files(stateDir: string): Map<string, DatabaseSync> {
  const dir = d1Folder(stateDir);
  const files = readdirSync(dir).filter((f) => f.endsWith('.sqlite') && f !== 'metadata.sqlite');
  const byFile = new Map(SHARD_BINDINGS.map((binding) => [d1FileName(binding), binding]));
  const unknown = files.filter((f) => !byFile.has(f));
  if (unknown.length > 0) throw new Error(`D1 files of no known binding in ${dir}: ${unknown.join(', ')}`);
  if (!files.includes(d1FileName(DIRECTORY))) throw new Error(`no D1 file for DB in ${dir}`);
  const out = new Map<string, DatabaseSync>();
  for (const binding of SHARD_BINDINGS) {
    const file = d1FileName(binding);
    // workerd writes the files meanwhile: wait for a write lock rather than fail at once.
    if (files.includes(file)) out.set(binding, new DatabaseSync(join(dir, file), { readOnly: true, timeout: 10_000 }));
  }
  return out;
}
