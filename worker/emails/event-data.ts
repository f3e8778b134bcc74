/**
 * An email event's outbox row keeps no second copy of its email. While the email stays, the row
 * holds a snapshot: the email's id and what can change after the event (thread, folders, role,
 * flags, the reply target's id), with `body` null as the mark (older snapshots hold a few more
 * fields that never change).
 * Whoever reads the row (a webhook call, the events feed) makes the data again: the email as stored
 * (emails/present.ts, bodies decompressed) with the snapshot's fields over it, so the payload is the
 * same bytes as when the event was made (the rest of an email never changes). When the email is gone
 * by then, its `email.delete` (or `email.draft.delete`), which holds the email as it was deleted and
 * is kept longer than every earlier event of it, serves in its place.
 */
import { unpackContent } from './content.ts';
import { SNAPSHOT_KEYS, withoutBodies } from './events.ts';
import { presentEmailList, type AttachmentRow, type EmailRow } from './present.ts';

const isSnapshot = (json: string): boolean => json.includes('"body":null') && JSON.parse(json).body === null;

const DELETE_TYPES = "('email.delete', 'email.draft.delete')";

/** The rows with their event data (`field`) as it was made (see above): one D1 batch for them all. */
export async function completeEmailEvents<K extends string, T extends Record<K, string>>(
  db: D1Database,
  rows: T[],
  field: K,
): Promise<T[]> {
  const snapshots = rows.filter((r) => isSnapshot(r[field]));
  if (snapshots.length === 0) return rows;
  const ids = JSON.stringify([...new Set(snapshots.map((r) => JSON.parse(r[field]).id as string))]);
  const [emails, attachmentRows, deletes] = await db.batch<Record<string, unknown>>([
    db.prepare('SELECT * FROM emails WHERE id IN (SELECT value FROM json_each(?))').bind(ids),
    db.prepare('SELECT * FROM attachments WHERE email_id IN (SELECT value FROM json_each(?)) ORDER BY id').bind(ids),
    db
      .prepare(
        `SELECT data_json FROM events WHERE type IN ${DELETE_TYPES}
         AND json_extract(data_json, '$.id') IN (SELECT value FROM json_each(?))`,
      )
      .bind(ids),
  ]);
  const stored = new Map((emails!.results as unknown as EmailRow[]).map((row) => [row.id, row]));
  const attachments = new Map<string, AttachmentRow[]>();
  for (const a of attachmentRows!.results as unknown as AttachmentRow[])
    attachments.set(a.email_id, [...(attachments.get(a.email_id) ?? []), a]);
  const deleted = new Map(
    (deletes!.results as { data_json: string }[]).map((r) => {
      const data = JSON.parse(r.data_json) as Record<string, unknown>;
      return [data.id as string, data];
    }),
  );
  return Promise.all(
    rows.map(async (row) => {
      if (!isSnapshot(row[field])) return row;
      const snapshot = JSON.parse(row[field]) as Record<string, unknown>;
      const id = snapshot.id as string;
      const email = stored.get(id);
      const base = email ? await presentStored(email, attachments.get(id) ?? []) : structuredClone(deleted.get(id));
      // Snapshots written without `folders` (the same list as `folder_ids`, events.ts).
      if ('folder_ids' in snapshot && !('folders' in snapshot)) snapshot.folders = snapshot.folder_ids;
      // Neither: the email went with its account (whose events then leave too).
      if (!base) return { ...row, [field]: JSON.stringify(withoutBodies(snapshot)) };
      for (const key of SNAPSHOT_KEYS) if (key in snapshot) base[key] = snapshot[key];
      return { ...row, [field]: JSON.stringify(base) };
    }),
  );
}

/** An email's list variant from its row and attachments: the snapshot gives its folders and reply target. */
async function presentStored(row: EmailRow, attachments: AttachmentRow[]): Promise<Record<string, unknown>> {
  const bodies = row.content ? await unpackContent(row.content) : undefined;
  return presentEmailList({ row, bodies, folder_ids: [], attachments, in_reply_to_id: null }) as Record<
    string,
    unknown
  >;
}
