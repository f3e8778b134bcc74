// The mail shards of a local run (`MAIL_SHARDS=n npm start`, docs/capacity.md): the D1 bindings, DB
// then MAIL_DB_2 … MAIL_DB_n, every one with the same migrations. The end-to-end tests read the same
// list to tell the local database files apart and to give each shard the run's migrated database.

/**
 * How many mail shards `MAIL_SHARDS` asks for (unset: 1); null when it is no whole number of at least one.
 * @param {string | undefined} value
 * @returns {number | null}
 */
export function mailShardCount(value) {
  const count = Number(value ?? 1);
  return Number.isInteger(count) && count >= 1 ? count : null;
}

/**
 * The D1 bindings of `count` mail shards: DB (the directory and the first shard), MAIL_DB_2 … MAIL_DB_count.
 * @param {number} count
 * @returns {string[]}
 */
export function mailShardBindings(count) {
  return ['DB', ...Array.from({ length: count - 1 }, (_, i) => `MAIL_DB_${i + 2}`)];
}
