/** API keys: the list, creating one (its value shown once) and revoking. */
import { useState } from 'hono/jsx/dom';
import { api, type List } from './api.ts';
import type { ApiKey } from './types.ts';
import { ConfirmButton, ErrorNote, formFields, formatTime, Secret, useApi } from './ui.tsx';

export function ApiKeysSection() {
  const keys = useApi(() => api<List<ApiKey>>('GET', '/api-keys?limit=250'), []);
  const [created, setCreated] = useState<ApiKey | null>(null);
  const [error, setError] = useState<unknown>(null);

  const create = async (event: Event) => {
    const form = event.currentTarget as HTMLFormElement;
    const { name } = formFields(event);
    setError(null);
    try {
      setCreated(await api<ApiKey>('POST', '/api-keys', { name }));
      form.reset();
      keys.reload();
    } catch (err) {
      setError(err);
    }
  };
  const revoke = async (key: ApiKey) => {
    setError(null);
    try {
      await api('DELETE', `/api-keys/${key.id}`);
      if (created?.id === key.id) setCreated(null);
      keys.reload();
    } catch (err) {
      setError(err);
    }
  };

  return (
    <section aria-labelledby="create-key">
      <h2 id="create-key">Create key</h2>
      <form class="inline" onSubmit={create}>
        <label for="key-name">Name</label>
        <input id="key-name" name="name" maxlength={100} required />
        <button type="submit">Create key</button>
      </form>
      {created?.key && (
        <div class="notice" role="status">
          <p>
            New key <strong>{created.name}</strong>. Copy it now: it will not be shown again.
          </p>
          <Secret value={created.key} label="New API key" />
        </div>
      )}
      <ErrorNote error={error ?? keys.error} />
      <h2>Keys</h2>
      <p class="hint">The admin key (ADMIN_API_KEY) is not listed; it cannot be revoked here.</p>
      <div class="table-wrap">
        <table>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Prefix</th>
              <th scope="col">Issued</th>
              <th scope="col">Last used</th>
              <th scope="col">
                <span class="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {keys.value?.data.map((key) => (
              <tr>
                <td>{key.name}</td>
                <td>
                  <code>{key.prefix}…</code>
                </td>
                <td>{formatTime(key.issued_at)}</td>
                <td>{formatTime(key.last_used_at)}</td>
                <td>
                  <ConfirmButton
                    label="Revoke"
                    question={`Revoke "${key.name}"? Clients using it stop working at once.`}
                    confirm="Yes, revoke"
                    onConfirm={() => revoke(key)}
                  />
                </td>
              </tr>
            ))}
            {keys.value?.data.length === 0 && (
              <tr>
                <td colSpan={5}>No keys yet.</td>
              </tr>
            )}
          </tbody>
        </table>
      </div>
    </section>
  );
}
