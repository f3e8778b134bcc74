/** The `data` of email events: the list variant, without bodies when it would exceed 64 KB (DECISIONS.md). */
import { presentEmailList, type EmailRecord } from './present.ts';

const MAX_EVENT_EMAIL_BYTES = 64 * 1024;

export function emailEventData(record: EmailRecord, bodies?: { html: string; plain: string }) {
  const email = presentEmailList(bodies ? { ...record, bodies } : record);
  if (JSON.stringify(email).length <= MAX_EVENT_EMAIL_BYTES) return email;
  const { body: _body, body_plain: _plain, ...rest } = email;
  return { ...rest, body_truncated: true };
}
