/** Emails: per account, its folders, a filtered list (folder, unread, starred, q) with cursor paging, and its scheduled sends. */
import { useState } from 'hono/jsx/dom';
import { api, query, type List } from './api.ts';
import { EmailView } from './email-view.tsx';
import { ScheduledList } from './scheduled.tsx';
import type { Account, EmailSummary, Folder } from './types.ts';
import { ErrorNote, formatAddress, formatTime, useApi } from './ui.tsx';

const PAGE = 25;

interface Filters {
  folder: string;
  unread: string;
  starred: boolean;
  q: string;
}
const NO_FILTERS: Filters = { folder: '', unread: '', starred: false, q: '' };

function FilterForm(props: { folders: Folder[]; filters: Filters; onApply: (f: Filters) => void }) {
  const submit = (event: Event) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget as HTMLFormElement);
    props.onApply({
      folder: String(form.get('folder') ?? ''),
      unread: String(form.get('unread') ?? ''),
      starred: form.get('starred') === 'on',
      q: String(form.get('q') ?? '').trim(),
    });
  };
  return (
    <form class="filters" onSubmit={submit} aria-label="Filters">
      <div class="field">
        <label for="filter-folder">Folder</label>
        <select id="filter-folder" name="folder" value={props.filters.folder}>
          <option value="">All folders</option>
          {props.folders.map((f) => (
            <option value={f.id}>
              {f.name}
              {f.role !== 'UNKNOWN' ? ` (${f.role})` : ''} · {f.total_count}
            </option>
          ))}
        </select>
      </div>
      <div class="field">
        <label for="filter-unread">Read state</label>
        <select id="filter-unread" name="unread" value={props.filters.unread}>
          <option value="">Read and unread</option>
          <option value="true">Unread only</option>
          <option value="false">Read only</option>
        </select>
      </div>
      <div class="check">
        <input id="filter-starred" name="starred" type="checkbox" checked={props.filters.starred} />
        <label for="filter-starred">Starred only</label>
      </div>
      <div class="field">
        <label for="filter-q">Search</label>
        <input id="filter-q" name="q" type="search" value={props.filters.q} />
      </div>
      <button type="submit">Apply</button>
    </form>
  );
}

function EmailList({ account, folders }: { account: Account; folders: Folder[] }) {
  const [filters, setFilters] = useState<Filters>(NO_FILTERS);
  // Cursors of the pages before this one, and this page's own (undefined: the first page).
  const [cursors, setCursors] = useState<(string | undefined)[]>([undefined]);
  const [open, setOpen] = useState<string | null>(null);
  const cursor = cursors[cursors.length - 1];
  const page = useApi(
    () =>
      api<List<EmailSummary>>(
        'GET',
        `/emails${query({
          account_id: account.id,
          folder: filters.folder,
          unread: filters.unread,
          starred: filters.starred ? 'true' : undefined,
          q: filters.q,
          limit: PAGE,
          cursor,
        })}`,
      ),
    [account.id, filters, cursor],
  );
  if (open) return <EmailView id={open} onBack={() => setOpen(null)} />;
  return (
    <>
      <FilterForm
        folders={folders}
        filters={filters}
        onApply={(next) => {
          setFilters(next);
          setCursors([undefined]);
        }}
      />
      <ErrorNote error={page.error} />
      <div class="table-wrap">
        <table aria-label="Emails">
          <thead>
            <tr>
              <th scope="col">From</th>
              <th scope="col">Subject</th>
              <th scope="col">Date</th>
            </tr>
          </thead>
          <tbody>
            {page.value?.data.map((email) => (
              <tr key={email.id} class={email.unread ? 'unread' : undefined}>
                <td>{formatAddress(email.from_attendee)}</td>
                <td>
                  <button type="button" class="link" onClick={() => setOpen(email.id)}>
                    {email.subject || '(no subject)'}
                  </button>
                  {email.unread && <span class="tag">unread</span>}
                  {email.starred && <span class="tag">starred</span>}
                  {email.has_attachments && <span class="tag">attachment</span>}
                  <div class="snippet">{email.snippet}</div>
                </td>
                <td>{formatTime(email.date)}</td>
              </tr>
            ))}
            {page.value?.data.length === 0 && (
              <tr>
                <td colSpan={3}>No emails match.</td>
              </tr>
            )}
          </tbody>
        </table>
      </div>
      <div class="actions">
        <button type="button" disabled={cursors.length < 2} onClick={() => setCursors(cursors.slice(0, -1))}>
          Newer
        </button>
        <button
          type="button"
          disabled={!page.value?.cursor}
          onClick={() => setCursors([...cursors, page.value?.cursor ?? undefined])}
        >
          Older
        </button>
        <button type="button" onClick={page.reload}>
          Refresh
        </button>
      </div>
    </>
  );
}

export function EmailsSection() {
  const accounts = useApi(() => api<List<Account>>('GET', '/accounts?limit=250'), []);
  const [chosen, setChosen] = useState<string | null>(null);
  const list = accounts.value?.data ?? [];
  const account = list.find((a) => a.id === chosen) ?? list[0];
  const folders = useApi(
    () =>
      account ? api<List<Folder>>('GET', `/folders${query({ account_id: account.id })}`) : Promise.resolve(undefined),
    [account?.id],
  );
  return (
    <section aria-label="Mail">
      <ErrorNote error={accounts.error ?? folders.error} />
      {accounts.value && list.length === 0 && <p>No mailbox connected yet: connect one in Mailboxes.</p>}
      {account && (
        <>
          <div class="field">
            <label for="emails-account">Account</label>
            <select
              id="emails-account"
              value={account.id}
              onChange={(e: Event) => setChosen((e.currentTarget as HTMLSelectElement).value)}
            >
              {list.map((a) => (
                <option value={a.id}>{a.email}</option>
              ))}
            </select>
          </div>
          <EmailList key={account.id} account={account} folders={folders.value?.data ?? []} />
          <ScheduledList key={`scheduled-${account.id}`} accountId={account.id} />
        </>
      )}
    </section>
  );
}
