/** Sign in with an API key: the key is tried against the API before it is kept for this tab. */
import { useState } from 'hono/jsx/dom';
import { callApi } from './api.ts';
import { signIn } from './session.ts';
import { ErrorNote, formFields } from './ui.tsx';

export function SignIn({ reason }: { reason: string | null }) {
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    const key = (formFields(event).key ?? '').trim();
    setBusy(true);
    setError(null);
    try {
      await callApi('GET', '/api-keys?limit=1', { key });
      signIn(key);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="sign-in">
      <h1>mailbox-edge dashboard</h1>
      {reason && (
        <p class="error" role="alert">
          Signed out: {reason}
        </p>
      )}
      <form onSubmit={submit}>
        <label for="api-key">API key</label>
        <input id="api-key" name="key" type="password" autocomplete="off" required />
        <button type="submit" disabled={busy}>
          Sign in
        </button>
        <ErrorNote error={error} />
        <p class="hint">The key is kept in this tab only and forgotten when the tab closes.</p>
      </form>
    </main>
  );
}
