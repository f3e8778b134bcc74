/** Mailboxes: every account with its status and initial sync, refreshed live; connect, reconnect, remove. */
import { useState } from 'hono/jsx/dom';
import { api, query, type List } from './api.ts';
import { ConnectForm } from './connect-form.tsx';
import type { Account, EmailSummary } from './types.ts';
import { ConfirmButton, ErrorNote, formatTime, useApi } from './ui.tsx';

const REFRESH_MS = 3000;
/** Counting synced emails stops here (pages of 250), so a large mailbox costs a bounded number of calls. */
const COUNT_PAGES = 4;

async function countEmails(accountId: string): Promise<string> {
  let cursor: string | null | undefined;
  let count = 0;
  for (let page = 0; page < COUNT_PAGES; page++) {
    const list = await api<List<EmailSummary>>('GET', `/emails${query({ account_id: accountId, limit: 250, cursor })}`);
    count += list.data.length;
    if (!list.cursor) return String(count);
    cursor = list.cursor;
  }
  return `${count}+`;
}

/** While the initial sync runs: how many emails of the account the API holds so far. */
function SyncProgress({ account }: { account: Account }) {
  const synced = useApi(() => countEmails(account.id), [account.id], REFRESH_MS * 2);
  return <span>{synced.value === undefined ? '' : ` · ${synced.value} emails synced so far`}</span>;
}

function InitialSync({ account }: { account: Account }) {
  if (!account.initial_sync_enable) return <span>off</span>;
  const window = `${account.initial_sync_days} days`;
  if (account.initial_sync === 'running')
    return (
      <span>
        running ({window}) <progress aria-label={`Initial sync of ${account.email}`} />
        <SyncProgress account={account} />
      </span>
    );
  return <span>{account.initial_sync === 'none' ? `waiting (${window})` : `${account.initial_sync} (${window})`}</span>;
}

function AccountRow({ account, onChange }: { account: Account; onChange: () => void }) {
  const [reconnecting, setReconnecting] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const remove = async () => {
    setError(null);
    try {
      await api('DELETE', `/accounts/${account.id}`);
      onChange();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <li class="card" aria-label={account.email}>
      <div class="card-head">
        <strong>{account.email}</strong>
        <span class={`status status-${account.status}`}>{account.status}</span>
      </div>
      <dl>
        <dt>Id</dt>
        <dd>
          <code>{account.id}</code>
        </dd>
        <dt>Connected</dt>
        <dd>{formatTime(account.connected_at)}</dd>
        <dt>Initial sync</dt>
        <dd>
          <InitialSync account={account} />
        </dd>
        {account.last_error && (
          <>
            <dt>Last error</dt>
            <dd class="error">{account.last_error}</dd>
          </>
        )}
      </dl>
      <div class="actions">
        <button type="button" aria-expanded={reconnecting} onClick={() => setReconnecting(!reconnecting)}>
          Reconnect
        </button>
        <ConfirmButton
          label="Remove"
          question={`Remove ${account.email}? Syncing stops and its mail leaves this service; the real mailbox is not touched.`}
          confirm="Yes, remove"
          onConfirm={remove}
        />
      </div>
      <ErrorNote error={error} />
      {reconnecting && (
        <ConnectForm
          account={account}
          onCancel={() => setReconnecting(false)}
          onDone={() => {
            setReconnecting(false);
            onChange();
          }}
        />
      )}
    </li>
  );
}

export function MailboxesSection() {
  const accounts = useApi(() => api<List<Account>>('GET', '/accounts?limit=250'), [], REFRESH_MS);
  // A new key remounts the connect form empty after a success.
  const [formKey, setFormKey] = useState(0);
  return (
    <>
      <section aria-labelledby="accounts-heading">
        <h2 id="accounts-heading">Accounts</h2>
        <ErrorNote error={accounts.error} />
        {accounts.value && accounts.value.data.length === 0 && <p>No mailbox connected yet.</p>}
        <ul class="cards">
          {accounts.value?.data.map((account) => (
            <AccountRow key={account.id} account={account} onChange={accounts.reload} />
          ))}
        </ul>
      </section>
      <section aria-labelledby="connect-heading">
        <h2 id="connect-heading">Connect mailbox</h2>
        <ConnectForm
          key={formKey}
          onDone={() => {
            setFormKey(formKey + 1);
            accounts.reload();
          }}
        />
      </section>
    </>
  );
}
