/** One endpoint's delivery log (GET /webhooks/conversations), refreshed live, with Retry. */
import { useState } from 'hono/jsx/dom';
import { api, query, type List } from './api.ts';
import type { Conversation, Endpoint } from './types.ts';
import { ErrorNote, formatTime, useApi } from './ui.tsx';

const REFRESH_MS = 3000;

export function DeliveryLog({ endpoint }: { endpoint: Endpoint }) {
  const log = useApi(
    () => api<List<Conversation>>('GET', `/webhooks/conversations${query({ endpoint_id: endpoint.id, limit: 50 })}`),
    [endpoint.id],
    REFRESH_MS,
  );
  const [error, setError] = useState<unknown>(null);
  const retry = async (conversation: Conversation) => {
    setError(null);
    try {
      await api('POST', `/webhooks/conversations/${conversation.id}/retry`);
      log.reload();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <div class="table-wrap">
      <ErrorNote error={error ?? log.error} />
      <table aria-label={`Deliveries to ${endpoint.url}`}>
        <thead>
          <tr>
            <th scope="col">Event</th>
            <th scope="col">Status</th>
            <th scope="col">Attempts</th>
            <th scope="col">Last HTTP status</th>
            <th scope="col">Last error</th>
            <th scope="col">Time</th>
            <th scope="col">
              <span class="sr-only">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {log.value?.data.map((c) => (
            <tr key={c.id}>
              <td>
                {c.event}
                <br />
                <code class="small">{c.event_id}</code>
              </td>
              <td>{c.status}</td>
              <td>{c.attempts}</td>
              <td>{c.last_status_code ?? '—'}</td>
              <td class="wrap">{c.last_error || '—'}</td>
              <td>{formatTime(c.updated_at)}</td>
              <td>
                <button
                  type="button"
                  disabled={!endpoint.enabled}
                  title={endpoint.enabled ? undefined : 'Resume the endpoint to retry'}
                  onClick={() => retry(c)}
                >
                  Retry
                </button>
              </td>
            </tr>
          ))}
          {log.value?.data.length === 0 && (
            <tr>
              <td colSpan={7}>No calls yet.</td>
            </tr>
          )}
        </tbody>
      </table>
    </div>
  );
}
