/** Emails › Scheduled: an account's scheduled sends (newest first) and a Cancel for those still waiting. */
import { useState } from 'hono/jsx/dom';
import { api, describeError, query, type List } from './api.ts';
import { ConfirmButton, ErrorNote, formatTime, useApi } from './ui.tsx';

interface ScheduledEmail {
  id: string;
  send_at: string;
  subject: string | null;
  to: { identifier: string }[];
  status: string;
  error: string | null;
}

export function ScheduledList({ accountId }: { accountId: string }) {
  const list = useApi(
    () => api<List<ScheduledEmail>>('GET', `/emails/scheduled${query({ account_id: accountId, limit: 25 })}`),
    [accountId],
    10_000,
  );
  const [failure, setFailure] = useState<string | null>(null);
  const cancel = async (id: string) => {
    setFailure(null);
    try {
      await api('DELETE', `/emails/scheduled/${id}`);
    } catch (err) {
      setFailure(describeError(err));
    }
    list.reload();
  };
  return (
    <section aria-labelledby="scheduled-heading">
      <h2 id="scheduled-heading">Scheduled</h2>
      <ErrorNote error={list.error ?? (failure ? new Error(failure) : null)} />
      <div class="table-wrap">
        <table aria-label="Scheduled">
          <thead>
            <tr>
              <th scope="col">Subject</th>
              <th scope="col">To</th>
              <th scope="col">Send at</th>
              <th scope="col">Status</th>
            </tr>
          </thead>
          <tbody>
            {list.value?.data.map((s) => (
              <tr key={s.id} aria-label={s.subject || '(no subject)'}>
                <td>{s.subject || '(no subject)'}</td>
                <td>{s.to.map((r) => r.identifier).join(', ')}</td>
                <td>{formatTime(s.send_at)}</td>
                <td>
                  <span class="tag">{s.status}</span>
                  {s.error && <div class="snippet">{s.error}</div>}
                  {s.status === 'scheduled' && (
                    <ConfirmButton
                      label="Cancel send"
                      question="Cancel this send?"
                      confirm="Yes, cancel it"
                      onConfirm={() => cancel(s.id)}
                    />
                  )}
                </td>
              </tr>
            ))}
            {list.value?.data.length === 0 && (
              <tr>
                <td colSpan={4}>Nothing scheduled.</td>
              </tr>
            )}
          </tbody>
        </table>
      </div>
    </section>
  );
}
