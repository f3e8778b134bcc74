-- Mail shards (worker/shards/registry.ts, docs/capacity.md). In DB, the directory: the binding
-- name of the database holding the account's mail, NULL for DB itself. In another shard, an
-- account's row there is only the mark its mail rows refer to (and that says whether it is being
-- removed): no settings, no credentials; `shard` names that database.
ALTER TABLE accounts ADD COLUMN shard TEXT;
