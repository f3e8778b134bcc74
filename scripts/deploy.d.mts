export const BUNDLE_LIMITS: { free: number; paid: number };
export function readBindings(toml: string): {
  name: string | null;
  database: string | null;
  databaseId: string | null;
  bucket: string | null;
  queue: string | null;
};
export function buildBundle(): { raw: number; compressed: number };
