/**
 * What makes an email the same email across folders, moves and resyncs. The base identity is
 * Gmail's X-GM-MSGID where present, else the Message-ID plus a content fingerprint (two different
 * messages can share a Message-ID), else the fingerprint alone. Two copies of one message that
 * coexist in one folder are two emails: the second and later ones carry `#2`, `#3`… after the base.
 */
import type { MessageIn } from '../../common/relay.ts';
import { sha256Hex } from '../../common/crypto.ts';
import type { EmailRow } from '../emails/present.ts';
import type { ParsedMessage } from '../ingest/types.ts';

export async function identityOf(
  message: Pick<MessageIn, 'gm_msgid'>,
  mail: Pick<ParsedMessage, 'message_id' | 'fingerprint'>,
): Promise<string> {
  if (message.gm_msgid) return `gm:${message.gm_msgid}`;
  if (mail.message_id) return `mid:${await sha256Hex(`${mail.message_id}\n${mail.fingerprint}`)}`;
  return `fp:${mail.fingerprint}`;
}

/** The identity of the n-th coexisting copy (1 is the base itself). */
export const copyIdentity = (base: string, n: number): string => (n <= 1 ? base : `${base}#${n}`);

/** The base identity of a stored email. */
export const baseIdentity = (identity: string): string => identity.replace(/#\d+$/, '');

/** Every email of the account carrying one of these base identities (all copies), by base. */
export async function emailsByBaseIdentity(
  db: D1Database,
  accountId: string,
  bases: string[],
): Promise<Map<string, EmailRow[]>> {
  const out = new Map<string, EmailRow[]>();
  if (bases.length === 0) return out;
  // One index range per base: the base itself and its copies ('#' sorts right below '$'); the CROSS
  // JOIN keeps json_each outside, so SQLite answers each base from the (account_id, identity) index.
  const { results } = await db
    .prepare(
      `SELECT e.* FROM json_each(?2) j CROSS JOIN emails e
       ON e.account_id = ?1 AND e.identity >= j.value AND e.identity < j.value || '$'`,
    )
    .bind(accountId, JSON.stringify([...new Set(bases)]))
    .all<EmailRow>();
  for (const row of results) {
    const base = baseIdentity(row.identity);
    out.set(base, [...(out.get(base) ?? []), row]);
  }
  return out;
}
