/**
 * The model-based integrity run: a seeded random sequence of what other mail clients do (see
 * operations.ts), interleaved with gateway SIGKILLs and restarts; every `checkEvery` steps the run
 * waits for quiescence and then demands that the API equals the server (check.ts), that no email
 * changed its id while its message stayed, and that the events told the truth. The run's own looks
 * retry a loaded machine's failures (harness.ts); one that gives up ends the run with `gaveUp` set,
 * apart from `problems`.
 */
import type { ImapFlow } from 'imapflow';
import { openImap } from '../../mailserver/client.ts';
import type { MailServer } from '../../mailserver/mailserver.ts';
import type { GatewayProcess, Service } from '../service.ts';
import { differences, eventProblems, readServer, singleInstanceIds } from './check.ts';
import { HarnessGaveUp, retrier, type Retrier } from './harness.ts';
import { prng } from '../../shared/prng.ts';
import { randomOperation, type ModelContext } from './operations.ts';

export interface ModelOptions {
  seed: number;
  steps: number;
  checkEvery: number;
  /** SIGKILL the gateway (and start a new one) every this many steps. */
  killEvery: number;
  mail: MailServer;
  service: Service;
  user: string;
  accountId: string;
  /** Starts a gateway process (the same id each time, as a restarted gateway would have). */
  startGateway(): GatewayProcess;
  gateway: GatewayProcess;
  /** Operations to leave out, by name (see operations.ts). */
  leaveOut?: string[];
  /** Stop after the step at which this time (epoch ms) has passed, with a last check. */
  stopAt?: number;
  /** How long to wait for the API to agree with the server at a check. */
  quiescenceMs?: number;
  /** The first X-Model-Id the run gives a message (the ones below are already on the server). */
  firstModelId?: number;
  log?: (line: string) => void;
}

export interface ModelFigures {
  seed: number;
  steps: number;
  checks: number;
  kills: number;
  messages: number;
  operations: Record<string, number>;
  seconds: number;
  /** Empty when the run found nothing wrong. */
  problems: string[];
  /** How often the run's own looks (GET /emails, the D1 file, the server's listing) had to be retried. */
  harnessRetries: number;
  /** Set when the run stopped because one of its own looks failed for minutes: no finding about the product. */
  gaveUp?: string;
}

export async function runModel(options: ModelOptions): Promise<ModelFigures> {
  const started = Date.now();
  const log = options.log ?? (() => undefined);
  let client = await openImap(options.mail.info(), options.user);
  const ctx: ModelContext = {
    mail: options.mail,
    user: options.user,
    client,
    random: prng(options.seed),
    nextId: options.firstModelId ?? 1,
    copied: new Set(),
    counts: {},
    trace: [],
    leaveOut: new Set(options.leaveOut ?? []),
    killGateway: async () => {
      await gateway.kill('SIGKILL');
      gateway = options.startGateway();
      kills++;
    },
  };
  let gateway = options.gateway;
  let kills = 0;
  let checks = 0;
  let known = new Map<number, string>();
  const problems: string[] = [];
  const look = retrier({ log });
  let gaveUp: string | undefined;

  const usableClient = async (): Promise<ImapFlow> => {
    if (client.usable) return client;
    client = await openImap(options.mail.info(), options.user);
    ctx.client = client;
    return client;
  };

  let step = 0;
  while (step < options.steps && problems.length === 0) {
    step++;
    const last = step === options.steps || Date.now() > (options.stopAt ?? Number.POSITIVE_INFINITY);
    try {
      await usableClient();
      await randomOperation(ctx);
    } catch (err) {
      // The server may drop a session (a UIDVALIDITY reset does): the next step reconnects.
      log(`step ${step}: ${(err as Error).message}`);
    }
    if (step % options.killEvery === 0) {
      await ctx.killGateway();
      ctx.trace.push(`step ${step}: gateway killed and restarted`);
    }
    if (step % options.checkEvery === 0 || last) {
      checks++;
      let found: Awaited<ReturnType<typeof check>>;
      try {
        found = await check(options, look, usableClient, known, ctx.copied);
      } catch (err) {
        if (!(err instanceof HarnessGaveUp)) throw err;
        gaveUp = `at the check after step ${step}: ${err.message}`;
        log(`step ${step}: ${gaveUp}`);
        break;
      }
      problems.push(...found.problems.map((p) => `after step ${step}: ${p}`));
      if (found.problems.length) problems.push('what happened before (oldest first):', ...ctx.trace);
      ctx.trace.length = 0;
      known = found.known;
      ctx.copied.clear();
      log(`step ${step}: checked, ${found.size} messages, ${found.problems.length} problems`);
    }
    if (last) break;
  }
  await client.logout().catch(() => undefined);
  return {
    seed: options.seed,
    steps: step,
    checks,
    kills,
    messages: ctx.nextId - (options.firstModelId ?? 1),
    operations: ctx.counts,
    seconds: Math.round((Date.now() - started) / 1000),
    problems,
    harnessRetries: look.retries,
    ...(gaveUp ? { gaveUp } : {}),
  };
}

async function check(
  options: ModelOptions,
  look: Retrier,
  client: () => Promise<ImapFlow>,
  before: Map<number, string>,
  copied: Set<number>,
): Promise<{ problems: string[]; known: Map<number, string>; size: number }> {
  const { service, accountId } = options;
  const deadline = Date.now() + (options.quiescenceMs ?? 120_000);
  const readBoth = async () => {
    const server = await look('the server listing', async () => readServer(await client()));
    return { server, diff: await look('D1', () => differences(server, service, accountId)) };
  };
  let { server, diff } = await readBoth();
  while (diff.length && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 500));
    ({ server, diff } = await readBoth());
  }
  // Quiescence includes the orphan grace: an email in no folder counts as a difference until deleted.
  const problems = [...diff];
  const known = await look('D1', () => singleInstanceIds(server, service, accountId));
  for (const [modelId, emailId] of known) {
    const was = before.get(modelId);
    if (was && was !== emailId && !copied.has(modelId)) {
      problems.push(`model ${modelId} changed its email id: ${was} → ${emailId}`);
      problems.push(...eventsOf(options.service, options.accountId, [was, emailId]));
    }
  }
  problems.push(...(await look('the events in D1', () => eventProblems(service, accountId))));
  const listed = (await look('GET /emails', () => service.listEmails(accountId))).length;
  const stored = await look(
    'D1',
    () =>
      new Set(
        service
          .mailQuery<{ id: string }>(accountId, 'SELECT id FROM emails WHERE account_id = ?', accountId)
          .map((r) => r.id),
      ).size,
  );
  if (listed !== stored) problems.push(`GET /emails lists ${listed} emails, D1 holds ${stored}`);
  if (problems.length) {
    // A message the Worker gave up on says why in the account's last_error.
    const [account] = options.service.query<{ status: string; last_error: string | null }>(
      'SELECT status, last_error FROM accounts WHERE id = ?',
      options.accountId,
    );
    if (account?.last_error) problems.push(`account ${account.status}, last_error: ${account.last_error}`);
    // Where the API has a missing message now (stale memberships have negative UIDs), and what it said of it.
    for (const modelId of new Set(diff.flatMap((p) => /^missing: .* \(model (\d+)\)$/.exec(p)?.[1] ?? []))) {
      const emails = options.service.mailQuery<{ id: string; places: string | null }>(
        options.accountId,
        `SELECT e.id, (SELECT group_concat(f.provider_id || '#' || ef.uid) FROM email_folders ef
           JOIN folders f ON f.id = ef.folder_id WHERE ef.email_id = e.id) AS places
         FROM emails e WHERE e.account_id = ? AND e.subject = ?`,
        options.accountId,
        `model ${modelId}`,
      );
      problems.push(`model ${modelId} in the API: ${emails.map((e) => `${e.id} at ${e.places}`).join('; ') || 'none'}`);
      problems.push(
        ...eventsOf(
          options.service,
          options.accountId,
          emails.map((e) => e.id),
        ),
      );
    }
  }
  return { problems, known, size: server.length };
}

/** The email events of some emails, oldest first: what the API said happened to them. */
function eventsOf(service: Service, accountId: string, emailIds: string[]): string[] {
  return emailIds.flatMap((id) =>
    service
      .mailQuery<{ type: string; folders: string; created_at: string }>(
        accountId,
        `SELECT type, json_extract(data_json, '$.folder_ids') AS folders, created_at FROM events
         WHERE json_extract(data_json, '$.id') = ? ORDER BY rowid`,
        id,
      )
      .map((e) => `  ${id}: ${e.type} folders ${e.folders} at ${e.created_at}`),
  );
}
