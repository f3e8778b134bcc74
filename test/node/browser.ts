/**
 * A real Chromium for dashboard tests: Debian's `chromium` (installed when missing, like Dovecot),
 * driven by playwright-core. `watchPage` collects what a page must never do: console errors, uncaught
 * exceptions, failed responses, requests to any origin but the service's own.
 */
import { chromium, type Browser, type BrowserContext } from 'playwright-core';
import { ensureDebianPackages } from '../shared/debian.ts';

const CHROMIUM = '/usr/bin/chromium';

export async function launchChromium(): Promise<Browser> {
  await ensureDebianPackages([CHROMIUM], ['chromium']);
  // --no-sandbox: the tests run as root, where Chromium's own sandbox refuses to start.
  return chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
}

export interface PageWatch {
  consoleErrors: string[];
  /** Requests to another origin (data:, blob: and about: are local, not requests). */
  foreignRequests: string[];
  /** Every request URL, to check that no secret ever travels in one. */
  requestUrls: string[];
  /** Responses of the service with status >= 400. */
  failedResponses: string[];
}

export function watchContext(context: BrowserContext, origin: string): PageWatch {
  const watch: PageWatch = { consoleErrors: [], foreignRequests: [], requestUrls: [], failedResponses: [] };
  context.on('console', (msg) => {
    if (msg.type() === 'error') watch.consoleErrors.push(`${msg.text()} (${msg.location().url})`);
  });
  context.on('weberror', (err) => watch.consoleErrors.push(`uncaught: ${err.error().message}`));
  context.on('request', (request) => {
    const url = request.url();
    watch.requestUrls.push(url);
    if (/^(data|blob|about):/.test(url)) return;
    if (new URL(url).origin !== origin) watch.foreignRequests.push(url);
  });
  context.on('response', (response) => {
    if (response.status() >= 400) watch.failedResponses.push(`${response.status()} ${response.url()}`);
  });
  return watch;
}
