/**
 * Applying the gateway's changes to D1 and R2. Each change becomes one D1 batch (one transaction)
 * holding the rows it touches and the outbox rows of its events; blobs go to R2 first, under keys
 * derived from the message's identity, so a retried change rewrites the same objects. Every change
 * is idempotent: a (folder, UID) already known is skipped, and events are only written for what
 * actually changed. The caller (the account's Durable Object) runs changes one at a time.
 */
import type { Change, FolderInfo, MessageIn } from '../../common/relay.ts';
import type { Env } from '../env.ts';
import { eventStatement, newEvent, type OutboxEvent } from '../events/outbox.ts';
import type { EventType } from '../events/types.ts';
import { folderName, mainRole, parentPath, presentFolder, roleOf, type FolderRow } from '../folders/present.ts';
import { normalizeAddress, parseMessage } from '../ingest/parse.ts';
import type { ParsedAddress, ParsedMessage } from '../ingest/types.ts';
import { newId } from '../lib/ids.ts';
import { fromBase64 } from '../lib/crypto.ts';
import { sha256Hex } from '../../common/crypto.ts';
import { iso, isoNow } from '../lib/time.ts';
import type { AttachmentRow, EmailRecord, EmailRow, StoredAddress } from '../emails/present.ts';
import { blobKeys, loadEmailRecords } from '../emails/store.ts';
import { chunks, placeholders } from '../lib/sql.ts';
import { emailEventData } from '../emails/events.ts';
import { outgoingByMessageId, outgoingFields } from '../send/outgoing.ts';
import { indexEmailStatements } from '../emails/search.ts';
import { Threader, threadedMessage } from '../threads/threader.ts';
import type { InitialSync } from './initial-sync.ts';

/** Where sync stands in one folder; `resync` is set while a folder is re-read after a UIDVALIDITY change. */
export interface CursorState {
  path: string;
  uidvalidity: number;
  last_uid: number;
  highest_modseq: string | null;
  resync: boolean;
}

export interface AccountContext {
  accountId: string;
  /** Lower-cased addresses of the account itself (left out of contacts). */
  ownAddresses: Set<string>;
  /** When the account connected: a re-read folder ignores mail that arrived before. */
  connectedAtMs: number;
}

/** What applying one change produced; the Durable Object commits it. */
export interface ChangeResult {
  statements: D1PreparedStatement[];
  events: OutboxEvent[];
  /** R2 objects to write before the D1 batch. */
  blobs: { key: string; body: Uint8Array | string; contentType: string }[];
  /** Emails left in no folder: deleted after a short grace unless they reappear (a move). */
  orphans: string[];
  /** Emails that reappeared: no longer orphans. */
  adopted: string[];
  /**
   * Indexes into `statements` where a unit (one message or one email with its event) ends. A change
   * too big for one D1 batch is only ever cut there, so no message is half written with its event
   * missing: a retry skips the committed ones and writes the rest whole.
   */
  unitEnds: number[];
}

/** At most this many email.update events for one thread merge (a runaway merge stays bounded). */
const MAX_MERGE_EVENTS = 500;

/** Bodies larger than this many UTF-8 bytes (HTML + text) go to R2; the row keeps a pointer. */
const INLINE_BODY_MAX_BYTES = 256 * 1024;

const utf8 = new TextEncoder();
const utf8Length = (text: string): number => utf8.encode(text).byteLength;

const emptyResult = (): ChangeResult => ({
  statements: [],
  events: [],
  blobs: [],
  orphans: [],
  adopted: [],
  unitEnds: [],
});

const endUnit = (result: ChangeResult): void => void result.unitEnds.push(result.statements.length);

export class ChangeApplier {
  private readonly env: Env;
  private readonly account: AccountContext;
  readonly cursors: Map<string, CursorState>;
  /** The account's initial sync, when one was asked for (the caller saves it with the cursors). */
  readonly initialSync: InitialSync | null;
  private folders = new Map<string, FolderRow>();

  constructor(
    env: Env,
    account: AccountContext,
    cursors: Map<string, CursorState>,
    initialSync: InitialSync | null = null,
  ) {
    this.env = env;
    this.account = account;
    this.cursors = cursors;
    this.initialSync = initialSync;
  }

  private get db(): D1Database {
    return this.env.DB;
  }

  async loadFolders(): Promise<void> {
    const { results } = await this.db
      .prepare('SELECT * FROM folders WHERE account_id = ?')
      .bind(this.account.accountId)
      .all<FolderRow>();
    this.folders = new Map(results.map((f) => [f.provider_id, f]));
  }

  private event(result: ChangeResult, type: EventType, data: unknown): void {
    const event = newEvent(type, this.account.accountId, data);
    result.events.push(event);
    result.statements.push(eventStatement(this.db, event));
  }

  async apply(change: Change): Promise<ChangeResult> {
    switch (change.type) {
      case 'folders':
        return this.applyFolders(change.folders, { baseline: false });
      case 'messages':
        return this.applyMessages(change.path, change.uidvalidity, change.messages, change.initial_sync === true);
      case 'flags':
        return this.applyFlags(change.path, change.uidvalidity, change.updates);
      case 'vanished':
        return this.applyVanished(change.path, change.uidvalidity, change.uids);
      case 'snapshot':
        return this.applySnapshot(change.path, change.uidvalidity, change.uids);
      case 'initial_sync': {
        const result = emptyResult();
        const moved = await this.initialSync?.advance(this.db, this.account.accountId, change.state, change.error);
        if (moved) {
          result.statements.push(...moved.statements);
          result.events.push(moved.event);
        }
        return result;
      }
      case 'cursor': {
        const cursor = this.cursors.get(change.path);
        if (cursor && cursor.uidvalidity === change.uidvalidity) {
          cursor.last_uid = Math.max(cursor.last_uid, change.last_uid);
          cursor.highest_modseq = change.highest_modseq;
          cursor.resync = false;
        }
        return emptyResult();
      }
    }
  }

  /**
   * The complete folder listing. `baseline` is the listing taken when the account connects: its
   * folders are created silently and their cursors start at the current UIDNEXT, so only mail that
   * arrives afterwards enters the API.
   */
  async applyFolders(listing: FolderInfo[], { baseline }: { baseline: boolean }): Promise<ChangeResult> {
    const result = emptyResult();
    const now = isoNow();
    const seen = new Set<string>();
    // Parents before children, so parent ids are known.
    const sorted = [...listing].sort(
      (a, b) => a.path.split(a.delimiter ?? '\u0000').length - b.path.split(b.delimiter ?? '\u0000').length,
    );

    for (const info of sorted) {
      seen.add(info.path);
      const parent = parentPath(info.path, info.delimiter);
      const wanted = {
        name: folderName(info.path, info.delimiter),
        role: roleOf(info),
        parent_id: parent ? (this.folders.get(parent)?.id ?? null) : null,
        total_count: info.total,
      };
      const existing = this.folders.get(info.path);
      if (!existing) {
        const row: FolderRow = {
          id: newId('folder'),
          account_id: this.account.accountId,
          provider_id: info.path,
          delimiter: info.delimiter,
          ...wanted,
        };
        this.folders.set(info.path, row);
        result.statements.push(
          this.db
            .prepare(
              `INSERT INTO folders (id, account_id, provider_id, name, role, parent_id, delimiter, total_count, created_at, updated_at)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
            )
            .bind(
              row.id,
              row.account_id,
              row.provider_id,
              row.name,
              row.role,
              row.parent_id,
              row.delimiter,
              row.total_count,
              now,
              now,
            ),
        );
        if (!baseline) this.event(result, 'email.folder.create', presentFolder(row));
      } else {
        // Name, role or parent: what a client shows of a folder, and what `email.folder.update` reports.
        const describedDifferently =
          existing.name !== wanted.name || existing.role !== wanted.role || existing.parent_id !== wanted.parent_id;
        if (describedDifferently || existing.total_count !== wanted.total_count) {
          Object.assign(existing, wanted);
          result.statements.push(
            this.db
              .prepare(
                'UPDATE folders SET name = ?, role = ?, parent_id = ?, total_count = ?, updated_at = ? WHERE id = ?',
              )
              .bind(wanted.name, wanted.role, wanted.parent_id, wanted.total_count, now, existing.id),
          );
          // Counts move with every message; only a change of identity is worth an event.
          if (describedDifferently) this.event(result, 'email.folder.update', presentFolder(existing));
        }
      }

      const cursor = this.cursors.get(info.path);
      if (!cursor) {
        this.cursors.set(info.path, {
          path: info.path,
          uidvalidity: info.uidvalidity,
          // At connect: everything already there is history. Later: a new folder's mail is all new.
          last_uid: baseline ? Math.max(0, info.uidnext - 1) : 0,
          highest_modseq: baseline ? info.highest_modseq : null,
          resync: false,
        });
      } else if (cursor.uidvalidity !== info.uidvalidity) {
        // The server renumbered the folder: forget its UIDs and read it again. Emails keep their ids
        // (identity is not the UID); the ones not found again are deleted after the grace period.
        const folder = this.folders.get(info.path)!;
        await this.detachAll(folder, result);
        Object.assign(cursor, { uidvalidity: info.uidvalidity, last_uid: 0, highest_modseq: null, resync: true });
      }
    }

    for (const [path, folder] of this.folders) {
      if (seen.has(path)) continue;
      await this.detachAll(folder, result);
      result.statements.push(this.db.prepare('DELETE FROM folders WHERE id = ?').bind(folder.id));
      this.event(result, 'email.folder.delete', presentFolder(folder));
      this.folders.delete(path);
      this.cursors.delete(path);
    }
    return result;
  }

  /** Remove every membership of a folder; emails left in no folder become orphans. */
  private async detachAll(folder: FolderRow, result: ChangeResult): Promise<void> {
    const { results } = await this.db
      .prepare('SELECT uid FROM email_folders WHERE folder_id = ?')
      .bind(folder.id)
      .all<{ uid: number }>();
    if (results.length)
      await this.detach(
        folder,
        results.map((r) => r.uid),
        result,
      );
  }

  private cursorFor(path: string, uidvalidity: number): { folder: FolderRow; cursor: CursorState } | null {
    const folder = this.folders.get(path);
    const cursor = this.cursors.get(path);
    // A batch for a folder we do not know, or from before a UIDVALIDITY change, is stale: skip it.
    if (!folder || !cursor || cursor.uidvalidity !== uidvalidity) return null;
    return { folder, cursor };
  }

  /** `initial`: older mail pulled by the initial sync, taken below the cursor when inside its window (the cursor stays). */
  async applyMessages(
    path: string,
    uidvalidity: number,
    messages: MessageIn[],
    initial = false,
  ): Promise<ChangeResult> {
    const result = emptyResult();
    const target = this.cursorFor(path, uidvalidity);
    if (!target || messages.length === 0) return result;
    const { folder, cursor } = target;

    const known = await this.membershipsByUid(
      folder.id,
      messages.map((m) => m.uid),
    );
    const wanted = initial
      ? (m: MessageIn) => !!this.initialSync?.accepts(path, uidvalidity, m)
      : (m: MessageIn) => m.uid > cursor.last_uid || cursor.resync;
    const fresh = messages.filter((m) => !known.has(m.uid) && wanted(m));
    if (initial)
      this.initialSync?.pulled(
        path,
        uidvalidity,
        messages.map((m) => m.uid),
      );
    else cursor.last_uid = Math.max(cursor.last_uid, ...messages.map((m) => m.uid));
    if (fresh.length === 0) return result;

    const parsed = await Promise.all(
      fresh.map(async (m) => ({ message: m, parsed: await parseMessage(fromBase64(m.raw)) })),
    );
    const withIdentity = await Promise.all(
      parsed.map(async (p) => ({ ...p, identity: await identityOf(p.message, p.parsed) })),
    );
    const existing = await this.emailsByIdentity(withIdentity.map((p) => p.identity));
    const outgoing = await outgoingByMessageId(
      this.db,
      this.account.accountId,
      withIdentity.flatMap((p) => p.parsed.message_id ?? []),
    );
    // What the new emails answer, for `in_reply_to.id` in their events (emails of this batch join as they are made).
    const repliedTo = await this.emailIdsByMessageId(withIdentity.flatMap((p) => p.parsed.in_reply_to ?? []));
    const now = isoNow();
    const adoptedFlags = new Map<string, ReturnType<typeof flagState>>();
    const threader = new Threader(this.db, this.account.accountId);

    for (const { message, parsed: mail, identity } of withIdentity) {
      const flags = flagState(message.flags);
      const present = existing.get(identity);
      if (present) {
        // The same message in another folder: a copy or the arriving side of a move.
        result.statements.push(
          this.db
            .prepare('INSERT OR REPLACE INTO email_folders (email_id, folder_id, account_id, uid) VALUES (?, ?, ?, ?)')
            .bind(present.id, folder.id, this.account.accountId, message.uid),
        );
        result.adopted.push(present.id);
        adoptedFlags.set(present.id, flags);
        endUnit(result);
        continue;
      }
      if (!initial && cursor.resync && Date.parse(message.internal_date) < this.account.connectedAtMs) continue;

      const row = await this.newEmailRow(mail, message, identity, folder, flags, threader, now, result);
      Object.assign(row, outgoingFields(row, outgoing.get(row.message_id ?? '')));
      existing.set(identity, row);
      if (row.message_id && !repliedTo.has(row.message_id)) repliedTo.set(row.message_id, row.id);
      const attachments = this.attachmentRows(row, mail, result);
      result.statements.push(insertEmail(this.db, row));
      result.statements.push(
        ...threader.record(row.id, row.thread_id, threadedMessage(mail, row.date_ms, message.gm_thrid)),
      );
      result.statements.push(
        ...indexEmailStatements(this.db, {
          emailId: row.id,
          accountId: row.account_id,
          subject: row.subject,
          body: mail.plain,
          participants: [mail.from, ...mail.to, ...mail.cc, ...mail.bcc],
        }),
      );
      result.statements.push(
        this.db
          .prepare('INSERT OR REPLACE INTO email_folders (email_id, folder_id, account_id, uid) VALUES (?, ?, ?, ?)')
          .bind(row.id, folder.id, this.account.accountId, message.uid),
      );
      for (const a of attachments) result.statements.push(insertAttachment(this.db, a));
      this.participantStatements(row, mail, result);

      const inReplyToId = row.in_reply_to ? (repliedTo.get(row.in_reply_to) ?? null) : null;
      const record: EmailRecord = {
        row,
        folder_ids: [folder.id],
        attachments,
        in_reply_to_id: inReplyToId,
        bodies: undefined,
      };
      const data = emailEventData(record, mail);
      this.event(result, row.is_draft ? 'email.draft.new' : 'email.new', data);
      // A delay notice is a warning, not a bounce: it is parsed (action 'delayed') but emits nothing.
      if (mail.bounce?.action === 'failed') {
        this.event(result, 'email.new.bounce', {
          email_id: row.id,
          original_message_id: mail.bounce.original_message_id,
          recipient: mail.bounce.recipient,
          status: mail.bounce.status,
          action: mail.bounce.action,
          diagnostic: mail.bounce.diagnostic,
        });
      }
      endUnit(result);
    }

    // Emails that gained a folder: new role, flags from this copy, one email.update each.
    if (adoptedFlags.size)
      await this.refreshEmails([...adoptedFlags.keys()], result, { flags: adoptedFlags, folderAdded: folder });
    return result;
  }

  private async newEmailRow(
    mail: ParsedMessage,
    message: MessageIn,
    identity: string,
    folder: FolderRow,
    flags: { unread: boolean; starred: boolean; draft: boolean },
    threader: Threader,
    now: string,
    result: ChangeResult,
  ): Promise<EmailRow> {
    const accountId = this.account.accountId;
    const digest = (await sha256Hex(`${accountId}\n${identity}`)).slice(0, 40);
    const dateMs = mail.date_ms ?? (Date.parse(message.internal_date) || Date.now());
    const isDraft = flags.draft || folder.role === 'DRAFTS';
    const thread = await threader.assign(threadedMessage(mail, dateMs, message.gm_thrid));
    result.statements.push(...thread.statements);
    if (thread.merged.length) await this.threadMergeEvents(result, thread.merged, thread.threadId);

    const rawKey = blobKeys.raw(accountId, digest);
    result.blobs.push({ key: rawKey, body: fromBase64(message.raw), contentType: 'message/rfc822' });
    let bodyHtml: string | null = mail.html;
    let bodyPlain: string | null = mail.plain;
    let bodyKey: string | null = null;
    if (utf8Length(mail.html) + utf8Length(mail.plain) > INLINE_BODY_MAX_BYTES) {
      bodyKey = blobKeys.bodies(accountId, digest);
      result.blobs.push({
        key: bodyKey,
        body: JSON.stringify({ html: mail.html, plain: mail.plain }),
        contentType: 'application/json',
      });
      bodyHtml = null;
      bodyPlain = null;
    }

    return {
      id: newId('email', dateMs > 0 ? Math.min(dateMs, Date.now()) : Date.now()),
      account_id: accountId,
      identity,
      thread_id: thread.threadId,
      provider_id: message.gm_msgid ?? null,
      message_id: mail.message_id,
      in_reply_to: mail.in_reply_to,
      references_json: JSON.stringify(mail.references),
      date: iso(dateMs),
      date_ms: dateMs,
      subject: mail.subject,
      subject_folded: mail.subject.toLowerCase(),
      snippet: mail.snippet,
      from_json: mail.from ? JSON.stringify(stored(mail.from)) : null,
      to_json: JSON.stringify(mail.to.map(stored)),
      cc_json: JSON.stringify(mail.cc.map(stored)),
      bcc_json: JSON.stringify(mail.bcc.map(stored)),
      reply_to_json: JSON.stringify(mail.reply_to.map(stored)),
      from_address: mail.from ? normalizeAddress(mail.from.address) : null,
      body_html: bodyHtml,
      body_plain: bodyPlain,
      body_key: bodyKey,
      headers_json: JSON.stringify(mail.headers),
      raw_key: rawKey,
      size: message.size,
      has_attachments: mail.has_attachments ? 1 : 0,
      unread: flags.unread ? 1 : 0,
      starred: flags.starred ? 1 : 0,
      is_draft: isDraft ? 1 : 0,
      role: folder.role,
      origin: 'external',
      tracking_id: null,
      draft_id: isDraft ? newId('draft') : null,
      created_at: now,
      updated_at: now,
    };
  }

  private attachmentRows(row: EmailRow, mail: ParsedMessage, result: ChangeResult): AttachmentRow[] {
    const digest = row
      .raw_key!.split('/')
      .pop()!
      .replace(/\.eml$/, '');
    return mail.attachments.map((a, index) => {
      const key = blobKeys.attachment(row.account_id, digest, index);
      result.blobs.push({ key, body: a.content, contentType: a.mime || 'application/octet-stream' });
      return {
        id: newId('attachment'),
        email_id: row.id,
        account_id: row.account_id,
        name: a.filename,
        extension: a.extension,
        size: a.size,
        mime: a.mime,
        cid: a.cid,
        inline: a.inline ? 1 : 0,
        blob_key: key,
      };
    });
  }

  /** Participants (for the address filters) and the account's contacts, counted once per email. */
  private participantStatements(row: EmailRow, mail: ParsedMessage, result: ChangeResult): void {
    const kinds: [string, ParsedAddress[]][] = [
      ['from', mail.from ? [mail.from] : []],
      ['to', mail.to],
      ['cc', mail.cc],
      ['bcc', mail.bcc],
    ];
    const contacts = new Map<string, string>();
    for (const [kind, list] of kinds) {
      const seen = new Set<string>();
      for (const a of list) {
        const address = normalizeAddress(a.address);
        if (!address || seen.has(address)) continue;
        seen.add(address);
        result.statements.push(
          this.db
            .prepare(
              'INSERT OR IGNORE INTO email_participants (email_id, account_id, kind, address) VALUES (?, ?, ?, ?)',
            )
            .bind(row.id, row.account_id, kind, address),
        );
        if (!this.account.ownAddresses.has(address) && !contacts.has(address)) contacts.set(address, a.name ?? '');
        else if (a.name && !contacts.get(address)) contacts.set(address, a.name);
      }
    }
    for (const [address, name] of contacts) {
      if (this.account.ownAddresses.has(address)) continue;
      result.statements.push(
        this.db
          .prepare(
            `INSERT INTO contacts (account_id, identifier, display_name, display_name_folded, emails_count, last_email_at, last_email_ms)
             VALUES (?, ?, ?, ?, 1, ?, ?)
             ON CONFLICT (account_id, identifier) DO UPDATE SET
               emails_count = emails_count + 1,
               display_name = CASE WHEN excluded.display_name != '' AND excluded.last_email_ms >= last_email_ms
                                   THEN excluded.display_name ELSE display_name END,
               display_name_folded = CASE WHEN excluded.display_name != '' AND excluded.last_email_ms >= last_email_ms
                                          THEN excluded.display_name_folded ELSE display_name_folded END,
               last_email_at = CASE WHEN excluded.last_email_ms > last_email_ms THEN excluded.last_email_at ELSE last_email_at END,
               last_email_ms = MAX(last_email_ms, excluded.last_email_ms)`,
          )
          .bind(row.account_id, address, name, name.toLowerCase(), row.date, row.date_ms),
      );
    }
  }

  async applyFlags(
    path: string,
    uidvalidity: number,
    updates: { uid: number; flags: string[] }[],
  ): Promise<ChangeResult> {
    const result = emptyResult();
    const target = this.cursorFor(path, uidvalidity);
    if (!target || updates.length === 0) return result;
    const byUid = await this.membershipsByUid(
      target.folder.id,
      updates.map((u) => u.uid),
    );
    const wanted = new Map<string, ReturnType<typeof flagState>>();
    for (const u of updates) {
      const emailId = byUid.get(u.uid);
      if (emailId) wanted.set(emailId, flagState(u.flags));
    }
    if (wanted.size) await this.refreshEmails([...wanted.keys()], result, { flags: wanted });
    return result;
  }

  async applyVanished(path: string, uidvalidity: number, uids: number[]): Promise<ChangeResult> {
    const result = emptyResult();
    const target = this.cursorFor(path, uidvalidity);
    if (!target || uids.length === 0) return result;
    await this.detach(target.folder, uids, result);
    return result;
  }

  async applySnapshot(path: string, uidvalidity: number, uids: number[]): Promise<ChangeResult> {
    const target = this.cursorFor(path, uidvalidity);
    if (!target) return emptyResult();
    const present = new Set(uids);
    const { results } = await this.db
      .prepare('SELECT uid FROM email_folders WHERE folder_id = ? AND uid <= ?')
      .bind(target.folder.id, target.cursor.last_uid)
      .all<{ uid: number }>();
    const gone = results.map((r) => r.uid).filter((uid) => !present.has(uid));
    return this.applyVanished(path, uidvalidity, gone);
  }

  /** Remove (folder, uid) memberships; emails still elsewhere get email.update, the rest become orphans. */
  private async detach(folder: FolderRow, uids: number[], result: ChangeResult): Promise<void> {
    const byUid = await this.membershipsByUid(folder.id, uids);
    if (byUid.size === 0) return;
    const emailIds = [...new Set(byUid.values())];
    for (const part of chunks([...byUid.keys()])) {
      result.statements.push(
        this.db
          .prepare(`DELETE FROM email_folders WHERE folder_id = ? AND uid IN (${placeholders(part.length)})`)
          .bind(folder.id, ...part),
      );
    }
    const remaining = await this.otherFolders(emailIds, folder.id);
    const stillFiled = emailIds.filter((id) => (remaining.get(id) ?? []).length > 0);
    result.orphans.push(...emailIds.filter((id) => !stillFiled.includes(id)));
    if (stillFiled.length) await this.refreshEmails(stillFiled, result, { folderRemoved: folder.id });
  }

  /**
   * Recompute role and flags of emails whose folders or flags changed, write what differs, and
   * emit one email.update for each email that really changed.
   */
  private async refreshEmails(
    emailIds: string[],
    result: ChangeResult,
    change: {
      flags?: Map<string, ReturnType<typeof flagState>>;
      folderRemoved?: string;
      folderAdded?: FolderRow;
    },
  ): Promise<void> {
    const rows: EmailRow[] = [];
    for (const part of chunks(emailIds)) {
      const { results } = await this.db
        .prepare(`SELECT * FROM emails WHERE id IN (${placeholders(part.length)})`)
        .bind(...part)
        .all<EmailRow>();
      rows.push(...results);
    }
    const records = await loadEmailRecords(this.env, rows);
    const folderById = new Map([...this.folders.values()].map((f) => [f.id, f]));
    const now = isoNow();

    for (const record of records) {
      const { row } = record;
      let folderIds = record.folder_ids;
      if (change.folderRemoved) folderIds = folderIds.filter((id) => id !== change.folderRemoved);
      if (change.folderAdded && !folderIds.includes(change.folderAdded.id))
        folderIds = [...folderIds, change.folderAdded.id];
      const role = mainRole(folderIds.map((id) => folderById.get(id)?.role ?? 'UNKNOWN'));
      const flags = change.flags?.get(row.id);
      const unread = flags ? (flags.unread ? 1 : 0) : row.unread;
      const starred = flags ? (flags.starred ? 1 : 0) : row.starred;
      const foldersChanged =
        folderIds.length !== record.folder_ids.length || folderIds.some((id) => !record.folder_ids.includes(id));
      if (!foldersChanged && role === row.role && unread === row.unread && starred === row.starred) continue;

      result.statements.push(
        this.db
          .prepare('UPDATE emails SET role = ?, unread = ?, starred = ?, updated_at = ? WHERE id = ?')
          .bind(role, unread, starred, now, row.id),
      );
      const updated: EmailRecord = {
        ...record,
        row: { ...row, role, unread, starred, updated_at: now },
        folder_ids: folderIds,
      };
      this.event(result, 'email.update', emailEventData(updated));
      endUnit(result);
    }
  }

  private async membershipsByUid(folderId: string, uids: number[]): Promise<Map<number, string>> {
    const out = new Map<number, string>();
    for (const part of chunks([...new Set(uids)])) {
      const { results } = await this.db
        .prepare(
          `SELECT uid, email_id FROM email_folders WHERE folder_id = ? AND uid IN (${placeholders(part.length)})`,
        )
        .bind(folderId, ...part)
        .all<{ uid: number; email_id: string }>();
      for (const r of results) out.set(r.uid, r.email_id);
    }
    return out;
  }

  private async otherFolders(emailIds: string[], exceptFolderId: string): Promise<Map<string, string[]>> {
    const out = new Map<string, string[]>();
    for (const part of chunks(emailIds)) {
      const { results } = await this.db
        .prepare(
          `SELECT email_id, folder_id FROM email_folders WHERE folder_id != ? AND email_id IN (${placeholders(part.length)})`,
        )
        .bind(exceptFolderId, ...part)
        .all<{ email_id: string; folder_id: string }>();
      for (const r of results) out.set(r.email_id, [...(out.get(r.email_id) ?? []), r.folder_id]);
    }
    return out;
  }

  /** Stored emails of threads merged into `threadId` changed their thread_id: one email.update each. */
  private async threadMergeEvents(result: ChangeResult, merged: string[], threadId: string): Promise<void> {
    const { results } = await this.db
      .prepare(
        `SELECT * FROM emails WHERE account_id = ? AND thread_id IN (${placeholders(merged.length)}) ORDER BY date_ms LIMIT ${MAX_MERGE_EVENTS}`,
      )
      .bind(this.account.accountId, ...merged)
      .all<EmailRow>();
    for (const record of await loadEmailRecords(this.env, results)) {
      this.event(result, 'email.update', emailEventData({ ...record, row: { ...record.row, thread_id: threadId } }));
    }
  }

  /** Ids of this account's emails by Message-ID (the earliest one when several share it). */
  private async emailIdsByMessageId(messageIds: string[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    for (const part of chunks([...new Set(messageIds)])) {
      const { results } = await this.db
        .prepare(
          `SELECT id, message_id FROM emails WHERE account_id = ? AND message_id IN (${placeholders(part.length)}) ORDER BY date_ms DESC`,
        )
        .bind(this.account.accountId, ...part)
        .all<{ id: string; message_id: string }>();
      for (const r of results) out.set(r.message_id, r.id);
    }
    return out;
  }

  private async emailsByIdentity(identities: string[]): Promise<Map<string, EmailRow>> {
    const out = new Map<string, EmailRow>();
    for (const part of chunks([...new Set(identities)])) {
      const { results } = await this.db
        .prepare(`SELECT * FROM emails WHERE account_id = ? AND identity IN (${placeholders(part.length)})`)
        .bind(this.account.accountId, ...part)
        .all<EmailRow>();
      for (const r of results) out.set(r.identity, r);
    }
    return out;
  }
}

function stored(a: ParsedAddress): StoredAddress {
  return { address: a.address, name: a.name ?? '' };
}

export function flagState(flags: string[]): { unread: boolean; starred: boolean; draft: boolean } {
  const set = new Set(flags.map((f) => f.toLowerCase()));
  return { unread: !set.has('\\seen'), starred: set.has('\\flagged'), draft: set.has('\\draft') };
}

/**
 * What makes an email the same email across folders, moves and resyncs: Gmail's X-GM-MSGID where
 * present, else the Message-ID plus a content fingerprint (two different messages can share a
 * Message-ID), else the fingerprint alone.
 */
export async function identityOf(
  message: Pick<MessageIn, 'gm_msgid'>,
  mail: Pick<ParsedMessage, 'message_id' | 'fingerprint'>,
): Promise<string> {
  if (message.gm_msgid) return `gm:${message.gm_msgid}`;
  if (mail.message_id) return `mid:${await sha256Hex(`${mail.message_id}\n${mail.fingerprint}`)}`;
  return `fp:${mail.fingerprint}`;
}

function insertEmail(db: D1Database, row: EmailRow): D1PreparedStatement {
  const columns = Object.keys(row) as (keyof EmailRow)[];
  return db
    .prepare(`INSERT INTO emails (${columns.join(', ')}) VALUES (${placeholders(columns.length)})`)
    .bind(...columns.map((c) => row[c]));
}

function insertAttachment(db: D1Database, a: AttachmentRow): D1PreparedStatement {
  const columns = Object.keys(a) as (keyof AttachmentRow)[];
  return db
    .prepare(`INSERT INTO attachments (${columns.join(', ')}) VALUES (${placeholders(columns.length)})`)
    .bind(...columns.map((c) => a[c]));
}
