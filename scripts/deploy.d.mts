export const BUNDLE_LIMITS: { free: number; paid: number };
export function readBindings(toml: string): {
  name: string | null;
  database: string | null;
  databaseId: string | null;
  bucket: string | null;
  queue: string | null;
  /** The mail shards besides DB: each `[[d1_databases]]` bound as MAIL_DB_n. */
  shards: { binding: string; database: string }[];
};
export function buildBundle(): { raw: number; compressed: number };
