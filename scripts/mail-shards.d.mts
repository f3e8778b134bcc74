/** How many mail shards `MAIL_SHARDS` asks for (unset: 1); null when it is no whole number of at least one (see mail-shards.mjs). */
export function mailShardCount(value: string | undefined): number | null;
/** The D1 bindings of `count` mail shards: DB, MAIL_DB_2 … MAIL_DB_count. */
export function mailShardBindings(count: number): string[];
