/**
 * The `data` of email events: the list variant. Bodies are dropped (with `body_truncated: true`)
 * when the payload would exceed 64 KB (DECISIONS.md): here, so outbox rows stay small, and again by
 * the webhook sender, which measures the whole envelope.
 *
 * The outbox keeps no second copy of an email's bodies: while the email stays, its event's row
 * holds the data with `body` and `body_plain` null (never their value in an Email), and whoever reads
 * the row (a webhook call, the events feed) puts the email's bodies back in their places
 * (`completeEmailEvents`). An email's bodies never change, so the data is the same bytes as when the
 * event was made. When the email is gone by then (deleted, its account removed), its bodies are gone
 * too: the data is sent without them, marked `body_truncated` like an oversized payload.
 */
import { rememberDataJson } from '../events/outbox.ts';
import { unpackContent } from './content.ts';
import { emailHtml, presentEmailList, type EmailRecord, type EmailRow } from './present.ts';

export const MAX_EVENT_PAYLOAD_BYTES = 64 * 1024;

/** The same data without `body` and `body_plain`, marked `body_truncated`. Other data is returned as is. */
export function withoutBodies(data: unknown): unknown {
  if (typeof data !== 'object' || data === null || !('body' in data || 'body_plain' in data)) return data;
  const { body: _html, body_plain: _plain, ...rest } = data as Record<string, unknown>;
  return { ...rest, body_truncated: true };
}

/**
 * `emailStays`: false for an event written as its email is deleted (email.delete): its row then
 * keeps the bodies, as nothing else will.
 */
export function emailEventData(
  record: EmailRecord,
  bodies?: { html: string; plain: string },
  { emailStays = true }: { emailStays?: boolean } = {},
) {
  const email = presentEmailList(bodies ? { ...record, bodies } : record);
  const json = JSON.stringify(email);
  // A UTF-16 unit is at most 3 UTF-8 bytes: most payloads need no encoding to be measured.
  if (json.length * 3 > MAX_EVENT_PAYLOAD_BYTES && new TextEncoder().encode(json).length > MAX_EVENT_PAYLOAD_BYTES)
    return withoutBodies(email);
  rememberDataJson(email, emailStays ? JSON.stringify({ ...email, body: null, body_plain: null }) : json);
  return email;
}

/**
 * What a query over `events ev` joins to complete the rows that name their email's bodies: the
 * email by its primary key, only for those rows.
 */
export const EMAIL_BODIES_JOIN = `LEFT JOIN emails eb ON json_type(ev.data_json, '$.body') = 'null' AND eb.id = ev.data_json ->> '$.id'`;
export const EMAIL_BODIES_COLUMNS =
  'eb.id AS bodies_of, eb.body_html AS bodies_html, eb.body_plain AS bodies_plain, eb.content AS bodies_content';

export interface EmailBodiesColumns {
  bodies_of?: string | null;
  bodies_html?: string | null;
  bodies_plain?: string | null;
  bodies_content?: EmailRow['content'];
}

/** The rows with their event data (`field`) as it was made: the email's bodies in their places (see above). */
export async function completeEmailEvents<K extends string, T extends EmailBodiesColumns & Record<K, string>>(
  rows: T[],
  field: K,
): Promise<T[]> {
  return Promise.all(
    rows.map(async (row) => {
      if (!row[field].includes('"body":null')) return row;
      const data = JSON.parse(row[field]) as Record<string, unknown>;
      if (data.body !== null || data.body_plain !== null) return row;
      if (!row.bodies_of) return { ...row, [field]: JSON.stringify(withoutBodies(data)) };
      const stored = {
        row: { body_html: row.bodies_html ?? null, body_plain: row.bodies_plain ?? null },
        bodies: row.bodies_content ? await unpackContent(row.bodies_content) : undefined,
      };
      data.body = emailHtml(stored);
      data.body_plain = stored.bodies?.plain ?? stored.row.body_plain ?? '';
      return { ...row, [field]: JSON.stringify(data) };
    }),
  );
}
