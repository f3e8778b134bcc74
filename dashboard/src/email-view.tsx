/** One email: its headers, its body (HTML in the sandboxed mail frame, else the text) and attachments. */
import { useState } from 'hono/jsx/dom';
import { api, callApi } from './api.ts';
import { MailFrame } from './mail-frame.tsx';
import type { Attachment, Email } from './types.ts';
import { ErrorNote, formatAddress, formatTime, useApi } from './ui.tsx';

const size = (bytes: number) =>
  bytes < 1024
    ? `${bytes} B`
    : bytes < 1024 * 1024
      ? `${(bytes / 1024).toFixed(1)} KB`
      : `${(bytes / 1048576).toFixed(1)} MB`;

/** Downloads need the key, so the bytes are fetched here and handed to the browser as a blob. */
async function download(email: Email, part: Attachment) {
  const blob = await (await callApi('GET', `/emails/${email.id}/attachments/${part.id}`)).blob();
  const url = URL.createObjectURL(blob);
  const link = document.createElement('a');
  link.href = url;
  link.download = part.name || 'attachment';
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

function Attachments({ email }: { email: Email }) {
  const [error, setError] = useState<unknown>(null);
  if (email.attachments.length === 0) return null;
  return (
    <section aria-label="Attachments">
      <h3>Attachments</h3>
      <ul class="attachments">
        {email.attachments.map((part) => (
          <li key={part.id}>
            <span>
              {part.name || '(no name)'} · {part.mime} · {size(part.size)}
            </span>{' '}
            <button type="button" onClick={() => download(email, part).catch(setError)}>
              Download {part.name}
            </button>
          </li>
        ))}
      </ul>
      <ErrorNote error={error} />
    </section>
  );
}

export function EmailView({ id, onBack }: { id: string; onBack: () => void }) {
  const email = useApi(() => api<Email>('GET', `/emails/${id}`), [id]);
  const e = email.value;
  return (
    <article class="email" aria-label="Email">
      <button type="button" onClick={onBack}>
        ← Back to the list
      </button>
      <ErrorNote error={email.error} />
      {e && (
        <>
          <h2>{e.subject || '(no subject)'}</h2>
          <dl>
            <dt>From</dt>
            <dd>{formatAddress(e.from_attendee)}</dd>
            <dt>To</dt>
            <dd>{e.to_attendees.map(formatAddress).join(', ')}</dd>
            {e.cc_attendees.length > 0 && (
              <>
                <dt>Cc</dt>
                <dd>{e.cc_attendees.map(formatAddress).join(', ')}</dd>
              </>
            )}
            <dt>Date</dt>
            <dd>{formatTime(e.date)}</dd>
          </dl>
          <details>
            <summary>All headers</summary>
            <div class="table-wrap">
              <table aria-label="Headers">
                <tbody>
                  {e.headers.map((h) => (
                    <tr>
                      <th scope="row">{h.name}</th>
                      <td class="wrap">{h.value}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          </details>
          {e.body ? <MailFrame email={e} /> : <pre class="plain">{e.body_plain}</pre>}
          <Attachments email={e} />
        </>
      )}
    </article>
  );
}
