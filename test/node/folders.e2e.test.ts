// End to end: folders created, renamed, moved and deleted through the API, checked on the real
// Dovecot and in the events (each exactly once, the folder's id and its emails' ids kept through a
// rename); refused requests change nothing on the server. `npm start`, the real gateway.
import type { ImapFlow } from 'imapflow';
import { describe, expect, it } from 'vitest';
import { connectMailbox } from './connect.ts';
import {
  endToEndSuite,
  type EventMark,
  eventMark,
  eventsSince,
  rfc822,
  severalPolls,
  waitListed,
} from './integrity-helpers.ts';
import { eventually } from './service.ts';

const suite = endToEndSuite('gw-folders');

/** The folder paths on the server (decoded), and how they were listed on the wire. */
async function serverFolders(client: ImapFlow): Promise<{ path: string; wire: string }[]> {
  return (await client.list())
    .map((f) => ({ path: f.path, wire: f.pathAsListed }))
    .sort((a, b) => a.path.localeCompare(b.path));
}

async function messagesIn(client: ImapFlow, path: string): Promise<number> {
  const status = await client.status(path, { messages: true });
  return status ? (status.messages ?? 0) : -1;
}

/** Events about folders and emails since `mark`, by type, with the ids they name. */
async function eventIds(accountId: string, mark: EventMark): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const e of await eventsSince(suite.service, accountId, mark)) {
    out[e.type] ??= [];
    out[e.type]!.push(e.data.id);
  }
  return out;
}

describe('folders through the API', () => {
  it('creates a folder and a nested one with a non-ASCII name, renames and moves them (ids kept), deletes them', async () => {
    const { service } = suite;
    const alice = await connectMailbox(service, suite.mail.info(), 'alice');
    const client = await suite.imap('alice');
    const base = `/${alice.id}/folders`;
    const start = eventMark(service);

    // Create: a top-level folder, then one inside it with a non-ASCII name.
    const top = await service.api('POST', base, { name: 'Projects' });
    expect(top.status, JSON.stringify(top.body)).toBe(201);
    expect(top.body).toMatchObject({ object: 'Folder', name: 'Projects', provider_id: 'Projects', parent_id: null });
    const child = await service.api('POST', base, { name: 'Été 2026', parent_id: top.body.id });
    expect(child.status, JSON.stringify(child.body)).toBe(201);
    expect(child.body).toMatchObject({ name: 'Été 2026', provider_id: 'Projects/Été 2026', parent_id: top.body.id });
    const listed = await serverFolders(client);
    const onWire = listed.find((f) => f.path === 'Projects/Été 2026');
    // Modified UTF-7 on the wire (RFC 3501 5.1.3), the name itself in the API.
    expect(onWire?.wire).toBe('Projects/&AMk-t&AOk- 2026');
    expect(listed.map((f) => f.path)).toContain('Projects');

    // Mail in the nested folder, then a rename with a new non-ASCII name: the folder and its emails keep their ids.
    await client.append('Projects/Été 2026', rfc822('folders one'));
    await client.append('Projects/Été 2026', rfc822('folders two'));
    const before = await waitListed(service, alice.id, ['folders one', 'folders two']);
    const renameMark = eventMark(service);
    const renamed = await service.api('PUT', `${base}/${child.body.id}`, { name: 'Hiver – Ñandú' });
    expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
    expect(renamed.body).toMatchObject({
      id: child.body.id,
      name: 'Hiver – Ñandú',
      provider_id: 'Projects/Hiver – Ñandú',
    });
    // The parent renamed: its subfolder moves with it on the server, with its id and its emails.
    const movedTop = await service.api('PUT', `${base}/${top.body.id}`, { name: 'Projets' });
    expect(movedTop.status, JSON.stringify(movedTop.body)).toBe(200);
    expect(movedTop.body).toMatchObject({ id: top.body.id, provider_id: 'Projets' });
    const paths = (await serverFolders(client)).map((f) => f.path);
    expect(paths).toEqual(expect.arrayContaining(['Projets', 'Projets/Hiver – Ñandú']));
    expect(paths.filter((p) => p.startsWith('Projects'))).toEqual([]);
    expect(await messagesIn(client, 'Projets/Hiver – Ñandú')).toBe(2);

    // New mail in the renamed folder is listed there: the sync has seen the new paths.
    await client.append('Projets/Hiver – Ñandú', rfc822('folders three'));
    const after = await waitListed(service, alice.id, ['folders three']);
    expect(after.get('folders three').folder_ids).toEqual([child.body.id]);
    for (const subject of ['folders one', 'folders two']) {
      expect(after.get(subject).id).toBe(before.get(subject).id);
      expect(after.get(subject).folder_ids).toEqual([child.body.id]);
    }
    const folder = await service.api('GET', `${base}/${child.body.id}`);
    expect(folder.body).toMatchObject({ provider_id: 'Projets/Hiver – Ñandú', parent_id: top.body.id });
    await severalPolls();
    const renameEvents = await eventIds(alice.id, renameMark);
    expect(renameEvents['email.folder.update']?.sort()).toEqual([child.body.id, top.body.id].sort());
    expect(renameEvents['email.folder.create']).toBeUndefined();
    expect(renameEvents['email.folder.delete']).toBeUndefined();
    expect(renameEvents['email.update']).toBeUndefined();
    expect(renameEvents['email.delete']).toBeUndefined();
    expect(renameEvents['email.new']).toEqual([after.get('folders three').id]);

    // One email is also filed in Archive: deleting the folder leaves it there (email.update); the others go (email.delete).
    const archive = (await service.api('GET', `/folders?account_id=${alice.id}`)).body.data.find(
      (f: any) => f.role === 'ARCHIVE',
    );
    const kept = before.get('folders one').id;
    const filed = await service.api('PUT', `/emails/${kept}`, { folders: [child.body.id, archive.id] });
    expect(filed.status, JSON.stringify(filed.body)).toBe(200);
    const deleteMark = eventMark(service);
    const refusedParent = await service.api('DELETE', `${base}/${top.body.id}`);
    expect(refusedParent.status).toBe(400);
    expect(refusedParent.body.detail).toMatch(/subfolders/);
    const deleted = await service.api('DELETE', `${base}/${child.body.id}`);
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(200);
    expect(deleted.body).toEqual({ object: 'FolderDeleted', id: child.body.id });
    expect((await serverFolders(client)).map((f) => f.path)).not.toContain('Projets/Hiver – Ñandú');
    const gone = [before.get('folders two').id, after.get('folders three').id].sort();
    await eventually(async () => ((await eventIds(alice.id, deleteMark))['email.delete']?.length === 2 ? true : null), {
      what: 'email.delete for the two emails left in no folder',
    });
    const topDeleted = await service.api('DELETE', `${base}/${top.body.id}`);
    expect(topDeleted.status, JSON.stringify(topDeleted.body)).toBe(200);
    expect((await serverFolders(client)).map((f) => f.path)).not.toContain('Projets');
    await severalPolls();
    const deleteEvents = await eventIds(alice.id, deleteMark);
    const folderEvents = (await eventsSince(service, alice.id, start))
      .filter((e) => e.type.startsWith('email.folder.'))
      .map((e) => `${e.type} ${e.data.id} ${e.data.provider_id}`);
    expect(deleteEvents['email.folder.delete']?.sort(), folderEvents.join('\n')).toEqual(
      [child.body.id, top.body.id].sort(),
    );
    expect(deleteEvents['email.delete']?.sort()).toEqual(gone);
    expect(deleteEvents['email.update']).toEqual([kept]);
    const survivor = await service.api('GET', `/emails/${kept}`);
    expect(survivor.body.folders).toEqual([archive.id]);
    expect((await service.api('GET', `/emails/${gone[0]}`)).status).toBe(404);

    // Over the whole story: each folder created once, and nothing else about folders.
    const all = await eventIds(alice.id, start);
    expect(all['email.folder.create']?.sort()).toEqual([child.body.id, top.body.id].sort());
  });

  it('refused requests change nothing on the server or in the API', async () => {
    const { service } = suite;
    const bob = await connectMailbox(service, suite.mail.info(), 'bob');
    const client = await suite.imap('bob');
    const base = `/${bob.id}/folders`;
    const folders = (await service.api('GET', `/folders?account_id=${bob.id}`)).body.data;
    const byRole = (role: string) => folders.find((f: any) => f.role === role);
    const own = await service.api('POST', base, { name: 'Clients' });
    expect(own.status).toBe(201);
    const serverBefore = await serverFolders(client);
    const apiBefore = (await service.api('GET', `/folders?account_id=${bob.id}`)).body.data;
    const mark = eventMark(service);

    const refused: [string, string, unknown, number, RegExp][] = [
      ['POST', base, { name: '' }, 400, /name: must not be empty/],
      ['POST', base, { name: '  ' }, 400, /name/],
      ['POST', base, { name: 'a/b' }, 400, /delimiter/],
      ['POST', base, { name: 'star*' }, 400, /\*/],
      ['POST', base, {}, 400, /name/],
      ['POST', base, { name: 'Archive' }, 409, /already exists/],
      ['POST', base, { name: 'inbox' }, 409, /already exists/],
      ['POST', base, { name: 'Sub', parent_id: 'fld_01JD8Z6Q3W4E5R6T7Y8V9K0P1A' }, 404, /parent_id/],
      ['POST', base, { name: 'Sub', parent_id: 'nonsense' }, 404, /parent_id/],
      ['POST', base, { name: 'dotted.name' }, 400, /IMAP server refused/],
      ['PUT', `${base}/${byRole('INBOX').id}`, { name: 'Other' }, 400, /INBOX cannot be renamed/],
      ['PUT', `${base}/${byRole('SENT').id}`, { name: 'Other' }, 400, /role SENT/],
      ['PUT', `${base}/${own.body.id}`, { name: 'Archive' }, 409, /already exists/],
      ['PUT', `${base}/${own.body.id}`, { parent_id: own.body.id }, 400, /into itself/],
      ['PUT', `${base}/fld_01JD8Z6Q3W4E5R6T7Y8V9K0P1A`, { name: 'X' }, 404, /Folder/],
      ['DELETE', `${base}/${byRole('INBOX').id}`, undefined, 400, /INBOX cannot be deleted/],
      ['DELETE', `${base}/${byRole('TRASH').id}`, undefined, 400, /role TRASH/],
    ];
    for (const [method, path, body, status, detail] of refused) {
      const res = await service.api(method, path, body);
      expect(res.status, `${method} ${path} ${JSON.stringify(body)}: ${JSON.stringify(res.body)}`).toBe(status);
      expect(res.body.detail).toMatch(detail);
      if (status === 409) expect(res.body.type).toMatch(/errors\/already_exists$/);
    }
    // A rename to the name it has is no change at all.
    const same = await service.api('PUT', `${base}/${own.body.id}`, { name: 'Clients' });
    expect(same.status).toBe(200);
    expect(same.body).toEqual(own.body);

    expect(await serverFolders(client)).toEqual(serverBefore);
    await severalPolls();
    expect((await service.api('GET', `/folders?account_id=${bob.id}`)).body.data).toEqual(apiBefore);
    expect((await eventsSince(service, bob.id, mark)).filter((e) => e.type.startsWith('email.folder.'))).toEqual([]);
  });
});
