/** The D1 databases as GET /api/v1/databases shows them: how full each is. */
import { z } from 'zod';

export const Database = z
  .strictObject({
    object: z.literal('Database'),
    binding: z.string().meta({
      description:
        'The D1 binding in wrangler.toml: `DB` (the directory and the first mail shard) or a mail shard `MAIL_DB_2`, `MAIL_DB_3`, …',
    }),
    size_bytes: z.int().meta({ description: 'Bytes the database takes now, as D1 reports them.' }),
    limit_bytes: z.int().meta({ description: "Cloudflare's limit for one D1 database (10 GB)." }),
    emails: z.int().meta({ description: 'Emails it holds.' }),
    accounts: z.int().meta({ description: 'Connected accounts whose mail it holds.' }),
  })
  .meta({ id: 'Database' });
export type Database = z.output<typeof Database>;

export const Databases = z
  .strictObject({
    object: z.literal('Databases'),
    data: z.array(Database).meta({ description: 'Every database of the workspace.' }),
  })
  .meta({ id: 'Databases' });
export type Databases = z.output<typeof Databases>;
