/**
 * Gateways: the live fleet, what each holds against its capacity and when it last beat (refreshed
 * every 10 s); below it, how full the D1 database is (refreshed every minute).
 */
import { api } from './api.ts';
import type { Database, Gateway } from './types.ts';
import { ErrorNote, formatTime, useApi } from './ui.tsx';

export function GatewaysSection() {
  const fleet = useApi(() => api<{ data: Gateway[] }>('GET', '/gateways'), [], 10_000);
  const gateways = fleet.value?.data;
  const held = gateways?.reduce((n, g) => n + g.accounts_held, 0) ?? 0;
  return (
    <section aria-labelledby="fleet">
      <h2 id="fleet">Live gateways</h2>
      <ErrorNote error={fleet.error} />
      {gateways && (
        <p class="hint" role="status">
          {gateways.length === 1 ? '1 gateway' : `${gateways.length} gateways`} holding {held}{' '}
          {held === 1 ? 'account' : 'accounts'}.
        </p>
      )}
      <div class="table-wrap">
        <table aria-labelledby="fleet">
          <thead>
            <tr>
              <th scope="col">Gateway</th>
              <th scope="col">Accounts</th>
              <th scope="col">Capacity</th>
              <th scope="col">Control socket</th>
              <th scope="col">Last heartbeat</th>
              <th scope="col">Version</th>
            </tr>
          </thead>
          <tbody>
            {gateways?.map((gateway) => (
              <tr>
                <td>
                  <code>{gateway.id}</code>
                </td>
                <td>{gateway.accounts_held}</td>
                <td>{gateway.capacity}</td>
                <td>{gateway.connected ? 'connected' : 'not connected'}</td>
                <td>{formatTime(gateway.last_heartbeat_at)}</td>
                <td>{gateway.version ?? '—'}</td>
              </tr>
            ))}
            {gateways?.length === 0 && (
              <tr>
                <td colSpan={6}>No gateway is running: mailboxes do not sync until one starts (npm run gateway).</td>
              </tr>
            )}
          </tbody>
        </table>
      </div>
      <DatabasesTable />
    </section>
  );
}

const megabytes = (bytes: number) => `${(bytes / 1e6).toLocaleString('en', { maximumFractionDigits: 1 })} MB`;

function DatabasesTable() {
  const databases = useApi(() => api<{ data: Database[] }>('GET', '/databases'), [], 60_000);
  return (
    <>
      <h2 id="storage">Databases</h2>
      <ErrorNote error={databases.error} />
      <div class="table-wrap">
        <table aria-labelledby="storage">
          <thead>
            <tr>
              <th scope="col">Binding</th>
              <th scope="col">Size</th>
              <th scope="col">Of the limit</th>
              <th scope="col">Emails</th>
              <th scope="col">Accounts</th>
            </tr>
          </thead>
          <tbody>
            {databases.value?.data.map((db) => (
              <tr>
                <td>
                  <code>{db.binding}</code>
                </td>
                <td>{megabytes(db.size_bytes)}</td>
                <td>{((db.size_bytes / db.limit_bytes) * 100).toFixed(1)} %</td>
                <td>{db.emails.toLocaleString('en')}</td>
                <td>{db.accounts}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </>
  );
}
