import { applyD1Migrations } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { shards } from '../../worker/shards/registry.ts';

// Each test file starts from databases with every migration applied (every mail shard has them all).
for (const shard of shards(env)) await applyD1Migrations(shard.db, env.TEST_MIGRATIONS);
