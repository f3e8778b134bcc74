/**
 * Connecting a mailbox (POST /auth/intent), or reconnecting one with new credentials (the same
 * form with the account's id). Presets fill the server settings of well-known providers from the
 * Worker's own table; the API's errors are shown next to the form.
 */
import { useState } from 'hono/jsx/dom';
import { providerDefaults } from '../../worker/accounts/providers.ts';
import { api } from './api.ts';
import type { Account } from './types.ts';
import { ErrorNote } from './ui.tsx';

const PRESETS = [
  { id: 'auto', label: 'Detect from the address' },
  { id: 'gmail.com', label: 'Gmail' },
  { id: 'outlook.com', label: 'Outlook.com / Hotmail' },
  { id: 'yahoo.com', label: 'Yahoo Mail' },
  { id: 'icloud.com', label: 'iCloud Mail' },
  { id: 'fastmail.com', label: 'Fastmail' },
  { id: 'zoho.com', label: 'Zoho Mail' },
  { id: 'aol.com', label: 'AOL Mail' },
  { id: 'gmx.net', label: 'GMX' },
  { id: 'other', label: 'Other (enter the servers below)' },
];

type Servers = Record<
  'imap_host' | 'imap_port' | 'imap_encryption' | 'imap_user' | 'smtp_host' | 'smtp_port' | 'smtp_encryption',
  string
>;
const EMPTY: Servers = {
  imap_host: '',
  imap_port: '',
  imap_encryption: '',
  imap_user: '',
  smtp_host: '',
  smtp_port: '',
  smtp_encryption: '',
};

function presetServers(preset: string): Servers {
  const known = providerDefaults(`user@${preset}`);
  if (!known) return EMPTY;
  return {
    ...EMPTY,
    imap_host: known.imap.host,
    imap_port: String(known.imap.port),
    imap_encryption: known.imap.encryption,
    smtp_host: known.smtp.host,
    smtp_port: String(known.smtp.port),
    smtp_encryption: known.smtp.encryption,
  };
}

const isGmail = (preset: string, email: string) =>
  preset === 'gmail.com' || /@(gmail|googlemail)\.com$/i.test(email.trim());

function GmailHelp() {
  return (
    <div class="notice" id="gmail-help">
      <p>
        <strong>Gmail: use an app password</strong>, not your Google password:
      </p>
      <ol>
        <li>Turn on 2-Step Verification in your Google Account (Security).</li>
        <li>Open Security → App passwords (myaccount.google.com/apppasswords).</li>
        <li>Create an app password named, say, "mailbox-edge".</li>
        <li>Paste its 16 letters into Password here (spaces do not matter).</li>
      </ol>
    </div>
  );
}

function EncryptionSelect(props: { id: string; value: string; onChange: (v: string) => void }) {
  return (
    <select
      id={props.id}
      value={props.value}
      onChange={(e: Event) => props.onChange((e.currentTarget as HTMLSelectElement).value)}
    >
      <option value="">Default for the port</option>
      <option value="SSL">SSL/TLS</option>
      <option value="STARTTLS">STARTTLS</option>
      <option value="NONE">None (plain text)</option>
    </select>
  );
}

export function ConnectForm(props: { account?: Account; onDone: (account: Account) => void; onCancel?: () => void }) {
  const reconnect = props.account;
  const prefix = reconnect ? `re-${reconnect.id}` : 'connect';
  const [email, setEmail] = useState(reconnect?.email ?? '');
  const [preset, setPreset] = useState('auto');
  const [servers, setServers] = useState<Servers>(EMPTY);
  const [syncOn, setSyncOn] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);

  const set = (name: keyof Servers) => (value: string) => setServers({ ...servers, [name]: value });
  const text = (name: keyof Servers, label: string, type = 'text') => (
    <div class="field">
      <label for={`${prefix}-${name}`}>{label}</label>
      <input
        id={`${prefix}-${name}`}
        type={type}
        value={servers[name]}
        onInput={(e: Event) => set(name)((e.currentTarget as HTMLInputElement).value)}
      />
    </div>
  );

  const submit = async (event: Event) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget as HTMLFormElement);
    const body: Record<string, unknown> = { provider: 'imap', email: email.trim(), password: form.get('password') };
    for (const [name, value] of Object.entries(servers))
      if (value.trim()) body[name] = name.endsWith('_port') ? Number(value) : value.trim();
    if (reconnect) body.account_id = reconnect.id;
    else if (syncOn) {
      body.initial_sync_enable = true;
      body.initial_sync_days = Number(form.get('initial_sync_days'));
    }
    setBusy(true);
    setError(null);
    try {
      props.onDone(await api<Account>('POST', '/auth/intent', body));
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="connect" onSubmit={submit} aria-label={reconnect ? `Reconnect ${reconnect.email}` : 'Connect mailbox'}>
      <div class="field">
        <label for={`${prefix}-email`}>Email</label>
        <input
          id={`${prefix}-email`}
          type="email"
          required
          readOnly={!!reconnect}
          value={email}
          onInput={(e: Event) => setEmail((e.currentTarget as HTMLInputElement).value)}
        />
      </div>
      <div class="field">
        <label for={`${prefix}-password`}>{reconnect ? 'New password' : 'Password'}</label>
        <input id={`${prefix}-password`} name="password" type="password" autocomplete="new-password" required />
      </div>
      <div class="field">
        <label for={`${prefix}-preset`}>Provider</label>
        <select
          id={`${prefix}-preset`}
          value={preset}
          onChange={(e: Event) => {
            const next = (e.currentTarget as HTMLSelectElement).value;
            setPreset(next);
            setServers(presetServers(next));
          }}
        >
          {PRESETS.map((p) => (
            <option value={p.id}>{p.label}</option>
          ))}
        </select>
      </div>
      {isGmail(preset, email) && <GmailHelp />}
      <details open={preset === 'other'}>
        <summary>Advanced: IMAP and SMTP servers</summary>
        <p class="hint">Leave empty for a well-known provider; the address's provider fills them in.</p>
        <fieldset>
          <legend>IMAP</legend>
          {text('imap_host', 'IMAP host')}
          {text('imap_port', 'IMAP port', 'number')}
          <div class="field">
            <label for={`${prefix}-imap_encryption`}>IMAP encryption</label>
            <EncryptionSelect
              id={`${prefix}-imap_encryption`}
              value={servers.imap_encryption}
              onChange={set('imap_encryption')}
            />
          </div>
          {text('imap_user', 'IMAP login (default: the email)')}
        </fieldset>
        <fieldset>
          <legend>SMTP</legend>
          {text('smtp_host', 'SMTP host')}
          {text('smtp_port', 'SMTP port', 'number')}
          <div class="field">
            <label for={`${prefix}-smtp_encryption`}>SMTP encryption</label>
            <EncryptionSelect
              id={`${prefix}-smtp_encryption`}
              value={servers.smtp_encryption}
              onChange={set('smtp_encryption')}
            />
          </div>
        </fieldset>
      </details>
      {!reconnect && (
        <fieldset>
          <legend>Initial sync</legend>
          <div class="check">
            <input
              id="connect-sync"
              type="checkbox"
              checked={syncOn}
              onChange={(e: Event) => setSyncOn((e.currentTarget as HTMLInputElement).checked)}
            />
            <label for="connect-sync">Also sync older mail</label>
          </div>
          <div class="field">
            <label for="connect-sync-days">Days back (1–30)</label>
            <input
              id="connect-sync-days"
              name="initial_sync_days"
              type="number"
              min={1}
              max={30}
              value="7"
              disabled={!syncOn}
            />
          </div>
        </fieldset>
      )}
      <div class="actions">
        <button type="submit" disabled={busy}>
          {busy ? 'Connecting…' : reconnect ? 'Reconnect' : 'Connect mailbox'}
        </button>
        {props.onCancel && (
          <button type="button" onClick={props.onCancel}>
            Cancel
          </button>
        )}
      </div>
      <ErrorNote error={error} />
    </form>
  );
}
