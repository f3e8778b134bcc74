// End to end: the workspace dashboard in a real Chromium against `npm start`, a real Dovecot and
// Postfix and the real gateway. Signs in, creates a key, connects a mailbox, creates a webhook
// endpoint, reads mail (an HTML email that tries to run a script and load a remote image), and
// watches that the page logs no error and talks to no other origin. Screenshots of each section go
// to test-artifacts/dashboard/ (not committed).
import { mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { MailServer } from '../mailserver/mailserver.ts';
import { launchChromium, type PageWatch, watchContext } from './browser.ts';
import { connectMailbox } from './connect.ts';
import { dumpLogsOnFailure, eventually, type Service, startEndToEnd, stopEndToEnd } from './service.ts';

const SCREENSHOTS = process.env.DASHBOARD_SCREENSHOTS ?? join(process.cwd(), 'test-artifacts', 'dashboard');
/** Generous: two cores shared with other jobs. */
const UI_TIMEOUT = 60_000;

let mail: MailServer;
let service: Service;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let watch: PageWatch;
let subscriber: Server;
let subscriberUrl: string;
const received: { type: string; data: { subject?: string } }[] = [];
let remote: Server;
let remoteOrigin: string;
const remoteHits: string[] = [];
let createdKey: { id: string; key: string };

const listen = (server: Server) =>
  new Promise<string>((resolve) =>
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      resolve(`http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`);
    }),
  );

const visible = (locator: Locator, timeout = UI_TIMEOUT) => locator.waitFor({ state: 'visible', timeout });

async function openSection(name: string) {
  await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name, exact: true }).click();
  await visible(page.getByRole('heading', { level: 1, name, exact: true }));
}

async function screenshot(name: string) {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

/** The test server's IMAP/SMTP settings, in the Advanced part of a connect or reconnect form. */
async function fillServers(scope: Page | Locator) {
  await scope.getByText('Advanced: IMAP and SMTP servers').click();
  await scope.getByLabel('IMAP host').fill(mail.host);
  await scope.getByLabel('IMAP port').fill(String(mail.imapPort));
  await scope.getByLabel('IMAP encryption').selectOption('SSL');
  await scope.getByLabel('SMTP host').fill(mail.host);
  await scope.getByLabel('SMTP port').fill(String(mail.smtpPort));
  await scope.getByLabel('SMTP encryption').selectOption('STARTTLS');
}

/** In Emails, alice's list: clicks Refresh until it shows an email with this subject; its link. */
async function findEmail(subject: string): Promise<Locator> {
  await page.getByLabel('Account', { exact: true }).selectOption({ label: 'alice@example.test' });
  const link = page.getByRole('table', { name: 'Emails' }).getByRole('button', { name: subject, exact: true });
  await eventually(
    async () => {
      if (await link.isVisible()) return true;
      await page.getByRole('button', { name: 'Refresh', exact: true }).click();
      return false;
    },
    { what: `"${subject}" in the Emails list`, timeoutMs: 90_000, intervalMs: 1000 },
  );
  return link;
}

async function openEmail(subject: string) {
  await (await findEmail(subject)).click();
  await visible(page.getByRole('heading', { level: 2, name: subject }));
}

beforeAll(async () => {
  ({ mail, service } = await startEndToEnd('gw-dashboard'));
  subscriber = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => {
      body += chunk;
    });
    req.on('end', () => {
      received.push(JSON.parse(body));
      res.writeHead(200).end('ok');
    });
  });
  subscriberUrl = `${await listen(subscriber)}/hooks`;
  // Stands for the rest of the internet: a tracking pixel and a script's beacon would land here.
  remote = createServer((req, res) => {
    remoteHits.push(req.url ?? '');
    res.writeHead(200, { 'Content-Type': 'image/gif' }).end();
  });
  remoteOrigin = await listen(remote);
  // connectMailbox retries until a gateway answers: after it, the dashboard's own connect cannot meet "no gateway".
  await connectMailbox(service, mail, 'bob');
  browser = await launchChromium();
  context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  watch = watchContext(context, service.base);
  page = await context.newPage();
});

afterAll(async () => {
  await browser?.close();
  subscriber?.close();
  remote?.close();
  await stopEndToEnd({ mail, service });
});

afterEach((ctx) => dumpLogsOnFailure(ctx, service));

describe('the dashboard', () => {
  it('is served at / with a strict CSP, and signs in with the admin key', async () => {
    const response = await page.goto(`${service.base}/`);
    const csp = response?.headers()['content-security-policy'] ?? '';
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("default-src 'none'");
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|https?:/);
    await page.getByLabel('API key', { exact: true }).fill(service.adminKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await visible(page.getByRole('heading', { level: 1, name: 'Mailboxes' }));
    // The key is in this tab's sessionStorage only.
    expect(await page.evaluate(() => Object.values(sessionStorage))).toEqual([service.adminKey]);
    expect(await context.cookies()).toEqual([]);
  });

  it('creates an API key that works against the API, shown once', async () => {
    await openSection('API keys');
    await page.getByLabel('Name', { exact: true }).fill('dashboard test key');
    await page.getByRole('button', { name: 'Create key' }).click();
    const notice = page.getByRole('status').filter({ hasText: 'will not be shown again' });
    await visible(notice);
    const key = (await notice.locator('code').textContent()) ?? '';
    expect(key).toMatch(/^mbx_/);
    const listed = await fetch(`${service.base}/api/v1/api-keys`, { headers: { 'X-API-KEY': key } });
    expect(listed.status).toBe(200);
    const data = ((await listed.json()) as { data: { id: string; name: string }[] }).data;
    createdKey = { id: data.find((k) => k.name === 'dashboard test key')!.id, key };
    await visible(page.getByRole('cell', { name: 'dashboard test key' }));
    await screenshot('api-keys');
  });

  it('connects alice in Mailboxes and shows accounts live', async () => {
    await openSection('Mailboxes');
    await visible(page.getByRole('listitem', { name: 'bob@example.test' }));
    const alice = mail.users.find((u) => u.user === 'alice')!;
    await page.getByLabel('Email', { exact: true }).fill(alice.email);
    await page.getByLabel('Password', { exact: true }).fill(alice.password);
    await fillServers(page);
    await page.getByRole('button', { name: 'Connect mailbox' }).click();
    const card = page.getByRole('listitem', { name: alice.email });
    await visible(card.getByText('running', { exact: true }));
    // Live: an account connected elsewhere appears without a reload.
    await connectMailbox(service, mail, 'carol');
    const carol = page.getByRole('listitem', { name: 'carol@example.test' });
    await visible(carol);
    await screenshot('mailboxes');

    // Reconnect with a new password (a wrong one is tried in the phone test below, in its own context).
    await card.getByRole('button', { name: 'Reconnect' }).click();
    const reconnect = card.getByRole('form', { name: `Reconnect ${alice.email}` });
    await fillServers(reconnect);
    await reconnect.getByLabel('New password').fill(alice.password);
    await reconnect.getByRole('button', { name: 'Reconnect' }).click();
    await reconnect.waitFor({ state: 'detached', timeout: UI_TIMEOUT });
    await visible(card.getByText('running', { exact: true }));

    // Remove asks first, saying the real mailbox stays as it is.
    await carol.getByRole('button', { name: 'Remove' }).click();
    await visible(carol.getByText('the real mailbox is not touched'));
    // The confirmation takes the keyboard focus; Enter confirms.
    await eventually(async () => (await page.locator(':focus').textContent()) === 'Yes, remove', {
      what: 'the focus on "Yes, remove"',
    });
    await page.keyboard.press('Enter');
    await carol.waitFor({ state: 'detached', timeout: UI_TIMEOUT });
    expect((await service.api('GET', '/accounts')).body.data.map((a: { email: string }) => a.email)).not.toContain(
      'carol@example.test',
    );
  });

  it('creates a webhook endpoint and shows its secret', async () => {
    await openSection('Webhooks');
    await page.getByLabel('URL', { exact: true }).fill(subscriberUrl);
    await page.getByLabel('email.new', { exact: true }).check();
    await page.getByLabel('alice@example.test', { exact: true }).check();
    await page.getByRole('button', { name: 'Create endpoint' }).click();
    const notice = page.getByRole('status').filter({ hasText: 'signed with this secret' });
    await visible(notice);
    expect(await notice.locator('code').textContent()).toMatch(/^whsec_/);
    await visible(page.getByRole('listitem', { name: subscriberUrl }));
    await screenshot('webhooks');
  });

  it("shows a message sent to alice in Emails, and its delivery in the endpoint's log", async () => {
    await mail.deliver({
      from: 'dave@example.test',
      to: 'alice@example.test',
      subject: 'Hello from the dashboard test',
      text: 'Plain words for alice.',
    });
    await openSection('Emails');
    await openEmail('Hello from the dashboard test');
    // A text body is shown as HTML too (the API's `body`), in the mail frame.
    await visible(page.frameLocator('iframe.mail-frame').getByText('Plain words for alice.'));
    await screenshot('emails');

    await eventually(() => received.some((e) => e.type === 'email.new'), {
      what: 'the webhook call',
      timeoutMs: 60_000,
    });
    await openSection('Webhooks');
    const endpoint = page.getByRole('listitem', { name: subscriberUrl });
    await endpoint.getByRole('button', { name: 'Deliveries' }).click();
    const log = page.getByRole('table', { name: `Deliveries to ${subscriberUrl}` });
    await visible(log.getByRole('row').filter({ hasText: 'email.new' }).filter({ hasText: 'delivered' }));
    await visible(log.getByRole('cell', { name: '200', exact: true }));
    await screenshot('webhook-deliveries');
  });

  it('lists a scheduled send of alice in Emails and cancels it', async () => {
    const accounts = await service.api('GET', '/accounts?limit=250');
    const alice = accounts.body.data.find((a: { email: string }) => a.email === 'alice@example.test');
    const subject = 'Scheduled from the dashboard test';
    const scheduled = await service.fetch(`${service.base}/api/v1/emails`, {
      method: 'POST',
      headers: { 'X-API-KEY': service.adminKey, 'Content-Type': 'application/json' },
      body: JSON.stringify({
        account_id: alice.id,
        to: [{ identifier: 'bob@example.test' }],
        subject,
        body: '<p>Later.</p>',
        send_at: new Date(Date.now() + 3_600_000).toISOString(),
      }),
    });
    expect(scheduled.status).toBe(202);
    const { id } = (await scheduled.json()) as { id: string };
    await openSection('Emails');
    await page.getByLabel('Account', { exact: true }).selectOption({ label: 'alice@example.test' });
    const row = page.getByRole('table', { name: 'Scheduled' }).getByRole('row', { name: subject });
    await visible(row.getByText('scheduled', { exact: true }));
    await row.getByRole('button', { name: 'Cancel send' }).click();
    await row.getByRole('button', { name: 'Yes, cancel it' }).click();
    await visible(row.getByText('cancelled', { exact: true }));
    expect((await service.api('GET', `/emails/scheduled/${id}`)).body.status).toBe('cancelled');
    await screenshot('scheduled');
  });

  it('shows an HTML email without running its script or loading its remote image', async () => {
    await mail.deliver({
      from: 'dave@example.test',
      to: 'alice@example.test',
      subject: 'An HTML email with tricks',
      text: 'tricks',
      html:
        '<html><head><style>#greeting { color: #0a5; }</style></head><body>' +
        '<p id="greeting" style="font-weight: bold">Hello in HTML</p>' +
        `<script>fetch('${remoteOrigin}/script'); top.document.title = 'pwned';</script>` +
        `<img src="${remoteOrigin}/pixel.gif" alt="tracking pixel">` +
        `<img src="x" onerror="fetch('${remoteOrigin}/onerror')">` +
        `<div style="background: url('${remoteOrigin}/background.gif')">styled</div>` +
        '</body></html>',
    });
    await openSection('Emails');
    const link = await findEmail('An HTML email with tricks');
    const frameResponse = page.waitForResponse(
      (r) => r.url().endsWith('/mail-view') && r.request().resourceType() === 'document',
      { timeout: UI_TIMEOUT },
    );
    await link.click();
    const frame = page.frameLocator('iframe.mail-frame');
    await visible(frame.getByText('Hello in HTML'));
    await visible(page.getByText(/Remote content is blocked \(\d+ items?\)/));
    // The second wall: the frame is sandboxed without scripts, and its document's own policy forbids them.
    expect(await page.locator('iframe.mail-frame').getAttribute('sandbox')).not.toContain('allow-scripts');
    const policy = (await frameResponse).headers()['content-security-policy'] ?? '';
    expect(policy).toMatch(/^sandbox /);
    expect(policy).toContain('img-src data:;');
    // Give a script or an image every chance to act before checking they did not.
    await page.waitForTimeout(2000);
    expect(remoteHits).toEqual([]);
    expect(await page.title()).not.toBe('pwned');
    await screenshot('email-html');
  });

  it('on a phone, in dark: shows the API errors, loads remote content when asked, signs out once the key is revoked', async () => {
    // Its own context, phone-sized and dark: the refusals here (401s) are the point, so this page is not
    // held to "no console error".
    const other = await browser.newContext({ viewport: { width: 390, height: 844 }, colorScheme: 'dark' });
    try {
      const phone = await other.newPage();
      await phone.goto(`${service.base}/`);
      await phone.getByLabel('API key', { exact: true }).fill('mbx_not_a_real_key');
      await phone.getByRole('button', { name: 'Sign in' }).click();
      await visible(phone.getByRole('alert').filter({ hasText: 'not valid or has been revoked' }));
      expect(await phone.evaluate(() => sessionStorage.length)).toBe(0);

      await phone.getByLabel('API key', { exact: true }).fill(createdKey.key);
      await phone.keyboard.press('Enter');
      await visible(phone.getByRole('listitem', { name: 'alice@example.test' }));
      await phone.screenshot({ path: join(SCREENSHOTS, 'mailboxes-phone.png'), fullPage: true });

      // The auth intent's error shows next to the form: a wrong password at reconnect.
      const card = phone.getByRole('listitem', { name: 'alice@example.test' });
      await card.getByRole('button', { name: 'Reconnect' }).click();
      const reconnect = card.getByRole('form', { name: 'Reconnect alice@example.test' });
      await fillServers(reconnect);
      await reconnect.getByLabel('New password').fill('not-alices-password');
      await reconnect.getByRole('button', { name: 'Reconnect' }).click();
      await visible(reconnect.getByRole('alert').filter({ hasText: 'Invalid credentials' }));
      await card.getByRole('button', { name: 'Cancel' }).click();

      // Remote content loads when the person asks for it (not in the main context, which talks to no one else).
      await phone.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Emails' }).click();
      await phone.getByLabel('Account', { exact: true }).selectOption({ label: 'alice@example.test' });
      await phone.getByRole('button', { name: 'An HTML email with tricks', exact: true }).click();
      // The view settles first, as for a reader: the blocked frame shown and the notice with its count,
      // so the click does not overlap the frame's own first post.
      await visible(phone.frameLocator('iframe.mail-frame').getByText('Hello in HTML'));
      const notice = phone.getByText(/Remote content is blocked \(\d+ items?\)/);
      await visible(notice);
      // The frame is posted again with remote content allowed; its images load from that document.
      const remoteFrame = phone.waitForResponse(
        (r) =>
          r.url().endsWith('/mail-view') &&
          r.request().resourceType() === 'document' &&
          (r.headers()['content-security-policy'] ?? '').includes('img-src data: https: http:'),
        { timeout: UI_TIMEOUT },
      );
      await phone.getByRole('button', { name: 'Load remote content' }).click();
      // The click was taken (the notice goes): if the post below never comes, the frame lost it, not the click.
      await notice.waitFor({ state: 'hidden', timeout: UI_TIMEOUT });
      expect((await remoteFrame).status()).toBe(200);
      await eventually(() => remoteHits.includes('/pixel.gif'), { what: 'the remote image, asked for' });
      expect(remoteHits.filter((hit) => hit !== '/pixel.gif' && hit !== '/background.gif')).toEqual([]);
      await phone.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Mailboxes' }).click();

      // Revoked in the main page's API keys section, after a confirmation.
      await openSection('API keys');
      const row = page.getByRole('row').filter({ hasText: 'dashboard test key' });
      await row.getByRole('button', { name: 'Revoke' }).click();
      await row.getByRole('button', { name: 'Yes, revoke' }).click();
      await row.waitFor({ state: 'detached', timeout: UI_TIMEOUT });
      // The Mailboxes view refreshes on its own: its next call meets the revoked key.
      await visible(
        phone.getByRole('alert').filter({ hasText: 'Signed out: The API key is not valid or has been revoked.' }),
      );
      await visible(phone.getByLabel('API key', { exact: true }));
      expect(await phone.evaluate(() => sessionStorage.length)).toBe(0);
    } finally {
      await other.close();
    }
  });

  it('shows the live gateways in Gateways, with the accounts each holds', async () => {
    // A second gateway joins the one the test started with: the section lists both.
    service.startGateway('gw-dashboard-2');
    await openSection('Gateways');
    const table = page.getByRole('table', { name: 'Live gateways' });
    // The section refreshes every 10 s; the counts settle once the second gateway took its share.
    const fleet = await eventually(
      async () => {
        const { body } = await service.api('GET', '/gateways');
        const data = body.data as { id: string; accounts_held: number }[];
        if (data.length !== 2 || data.reduce((n, g) => n + g.accounts_held, 0) !== 2) return null;
        for (const gateway of data) {
          const row = table.getByRole('row').filter({ has: page.getByRole('cell', { name: gateway.id, exact: true }) });
          if ((await row.getByRole('cell').nth(1).textContent()) !== String(gateway.accounts_held)) return null;
        }
        return data;
      },
      { what: 'both gateways in the Gateways table with their accounts', timeoutMs: 90_000, intervalMs: 1000 },
    );
    expect(fleet.map((g) => g.id).sort()).toEqual(['gw-dashboard', 'gw-dashboard-2']);
    await visible(page.getByRole('status').filter({ hasText: '2 gateways holding 2 accounts.' }));
    // Below the fleet, how full the database is.
    const databases = page.getByRole('table', { name: 'Databases' });
    await visible(databases.getByRole('cell', { name: 'DB', exact: true }));
    await screenshot('gateways');
  });

  it('signs out on Sign out, forgetting the key', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await visible(page.getByLabel('API key', { exact: true }));
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
  });

  it('logged no console error and made no request to another origin or with a key in the URL', () => {
    expect(watch.consoleErrors).toEqual([]);
    expect(watch.failedResponses).toEqual([]);
    expect(watch.foreignRequests).toEqual([]);
    for (const url of watch.requestUrls) {
      expect(url).not.toContain(service.adminKey);
      expect(url).not.toContain(createdKey.key);
    }
  });
});
