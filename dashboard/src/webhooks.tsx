/** Webhooks: endpoints (create, pause/resume, delete, secret) and each endpoint's delivery log. */
import { useState } from 'hono/jsx/dom';
import { EVENT_TYPES } from '../../worker/events/types.ts';
import { api, type List } from './api.ts';
import { DeliveryLog } from './deliveries.tsx';
import type { Account, Endpoint } from './types.ts';
import { ConfirmButton, ErrorNote, Secret, useApi } from './ui.tsx';

function CreateEndpoint({ accounts, onCreated }: { accounts: Account[]; onCreated: (e: Endpoint) => void }) {
  const [error, setError] = useState<unknown>(null);
  const submit = async (event: Event) => {
    event.preventDefault();
    const form = event.currentTarget as HTMLFormElement;
    const fields = new FormData(form);
    setError(null);
    try {
      const endpoint = await api<Endpoint>('POST', '/webhooks/endpoints', {
        url: String(fields.get('url') ?? '').trim(),
        description: String(fields.get('description') ?? ''),
        trigger_events: fields.getAll('trigger_events').map(String),
        account_ids: fields.getAll('account_ids').map(String),
      });
      form.reset();
      onCreated(endpoint);
    } catch (err) {
      setError(err);
    }
  };
  return (
    <form class="connect" onSubmit={submit} aria-label="Create endpoint">
      <div class="field">
        <label for="endpoint-url">URL</label>
        <input id="endpoint-url" name="url" type="url" required placeholder="https://example.com/hooks/mail" />
      </div>
      <div class="field">
        <label for="endpoint-description">Description</label>
        <input id="endpoint-description" name="description" maxlength={500} />
      </div>
      <fieldset>
        <legend>Events</legend>
        <div class="checks">
          {EVENT_TYPES.map((type) => (
            <div class="check" key={type}>
              <input id={`event-${type}`} type="checkbox" name="trigger_events" value={type} />
              <label for={`event-${type}`}>{type}</label>
            </div>
          ))}
        </div>
      </fieldset>
      <fieldset>
        <legend>Accounts (none checked: every account)</legend>
        {accounts.length === 0 && <p class="hint">No mailbox connected yet.</p>}
        <div class="checks">
          {accounts.map((account) => (
            <div class="check" key={account.id}>
              <input id={`endpoint-account-${account.id}`} type="checkbox" name="account_ids" value={account.id} />
              <label for={`endpoint-account-${account.id}`}>{account.email}</label>
            </div>
          ))}
        </div>
      </fieldset>
      <div class="actions">
        <button type="submit">Create endpoint</button>
      </div>
      <ErrorNote error={error} />
    </form>
  );
}

function EndpointRow(props: { endpoint: Endpoint; accounts: Account[]; onChange: () => void }) {
  const { endpoint } = props;
  const [open, setOpen] = useState<'log' | 'secret' | null>(null);
  const [error, setError] = useState<unknown>(null);
  const act = (method: string, body?: unknown) => async () => {
    setError(null);
    try {
      await api(method, `/webhooks/endpoints/${endpoint.id}`, body);
      props.onChange();
    } catch (err) {
      setError(err);
    }
  };
  const emailOf = (id: string) => props.accounts.find((a) => a.id === id)?.email ?? id;
  const toggle = (what: 'log' | 'secret') => () => setOpen(open === what ? null : what);
  return (
    <li class="card" aria-label={endpoint.url}>
      <div class="card-head">
        <strong class="wrap">{endpoint.url}</strong>
        <span class={`status ${endpoint.enabled ? 'status-running' : 'status-disconnected'}`}>
          {endpoint.enabled ? 'enabled' : 'paused'}
        </span>
      </div>
      <dl>
        {endpoint.description && (
          <>
            <dt>Description</dt>
            <dd>{endpoint.description}</dd>
          </>
        )}
        <dt>Events</dt>
        <dd>{endpoint.trigger_events.join(', ')}</dd>
        <dt>Accounts</dt>
        <dd>{endpoint.account_ids.length ? endpoint.account_ids.map(emailOf).join(', ') : 'all accounts'}</dd>
      </dl>
      <div class="actions">
        <button type="button" aria-expanded={open === 'log'} onClick={toggle('log')}>
          Deliveries
        </button>
        <button type="button" aria-expanded={open === 'secret'} onClick={toggle('secret')}>
          Secret
        </button>
        <button type="button" onClick={act('PATCH', { enabled: !endpoint.enabled })}>
          {endpoint.enabled ? 'Pause' : 'Resume'}
        </button>
        <ConfirmButton
          label="Delete"
          question={`Delete the endpoint ${endpoint.url}? Calls waiting for it are dropped.`}
          confirm="Yes, delete"
          onConfirm={act('DELETE')}
        />
      </div>
      <ErrorNote error={error} />
      {open === 'secret' && <Secret value={endpoint.secret} label={`Signing secret of ${endpoint.url}`} />}
      {open === 'log' && <DeliveryLog endpoint={endpoint} />}
    </li>
  );
}

export function WebhooksSection() {
  const endpoints = useApi(() => api<List<Endpoint>>('GET', '/webhooks/endpoints?limit=250'), []);
  const accounts = useApi(() => api<List<Account>>('GET', '/accounts?limit=250'), []);
  const [created, setCreated] = useState<Endpoint | null>(null);
  const accountList = accounts.value?.data ?? [];
  return (
    <>
      <section aria-labelledby="endpoints-heading">
        <h2 id="endpoints-heading">Endpoints</h2>
        <ErrorNote error={endpoints.error ?? accounts.error} />
        {endpoints.value && endpoints.value.data.length === 0 && <p>No endpoint yet.</p>}
        <ul class="cards">
          {endpoints.value?.data.map((endpoint) => (
            <EndpointRow key={endpoint.id} endpoint={endpoint} accounts={accountList} onChange={endpoints.reload} />
          ))}
        </ul>
      </section>
      <section aria-labelledby="create-endpoint-heading">
        <h2 id="create-endpoint-heading">Create endpoint</h2>
        {created && (
          <div class="notice" role="status">
            <p>
              Endpoint created. Its calls are signed with this secret (X-Email-Engine-Signature); keep it with the
              receiver.
            </p>
            <Secret value={created.secret} label="Signing secret of the new endpoint" />
          </div>
        )}
        <CreateEndpoint
          accounts={accountList}
          onCreated={(endpoint) => {
            setCreated(endpoint);
            endpoints.reload();
          }}
        />
      </section>
    </>
  );
}
