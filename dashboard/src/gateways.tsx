/** Gateways: the live fleet, what each holds against its capacity and when it last beat (refreshed every 10 s). */
import { api } from './api.ts';
import type { Gateway } from './types.ts';
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
        <table>
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
    </section>
  );
}
