// The gateway's container image, built from the Dockerfile with Debian's buildah on a Node 24 base
// made from this machine's files (no registry needed), and a gateway run from it (chroot isolation,
// the host's network) against `npm start` and the test Dovecot: it holds an account, relays new mail
// to the API, and on SIGTERM (the image's STOPSIGNAL) hands its account back. The image runs as a
// user other than root and is under 200 MB.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  BASE_IMAGE,
  buildah,
  buildahUnavailable,
  buildGatewayImage,
  buildNodeBase,
  GATEWAY_IMAGE,
} from '../image/buildah.ts';
import { startMailServer, type MailServer } from '../mailserver/mailserver.ts';
import { connectMailbox } from './connect.ts';
import { freePort } from './helpers.ts';
import { healthz } from './operator.ts';
import { dumpLogsOnFailure, eventually, startService, type Service } from './service.ts';

const unavailable = buildahUnavailable();
const GATEWAY_ID = `gw-image-${process.pid}`;

let mail: MailServer;
let service: Service;
let container: string | null = null;
let run: ChildProcess | null = null;
const log: string[] = [];

interface ImageConfig {
  User: string;
  Cmd: string[];
  WorkingDir: string;
  StopSignal?: string;
  Healthcheck?: { Test: string[] };
  Env: string[];
}

const imageConfig = (): ImageConfig => JSON.parse(buildah(['inspect', '--type', 'image', GATEWAY_IMAGE])).Docker.config;

/** buildah prints sizes in decimal units ("146 MB"). */
function bytesOf(size: number | string): number {
  if (typeof size === 'number') return size;
  const match = /^([\d.]+)\s*(B|kB|KB|MB|GB)$/.exec(size.trim());
  if (!match) throw new Error(`unexpected image size: ${size}`);
  return Number(match[1]) * { B: 1, kB: 1e3, KB: 1e3, MB: 1e6, GB: 1e9 }[match[2] as 'B'];
}

/** The gateway's process inside the container: running the bundle, with our gateway id in its environment. */
function gatewayPid(): number | null {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'latin1');
      if (!cmdline.includes('dist/gateway/main.mjs') || cmdline.includes('buildah')) continue;
      const environ = readFileSync(`/proc/${entry}/environ`, 'latin1').split('\0');
      if (environ.includes(`GATEWAY_ID=${GATEWAY_ID}`)) return Number(entry);
    } catch {
      // gone, or not ours to read
    }
  }
  return null;
}

describe.skipIf(unavailable !== null)(`the gateway image${unavailable ? ` (skipped: ${unavailable})` : ''}`, () => {
  beforeAll(async () => {
    buildNodeBase(process.cwd());
    buildGatewayImage(process.cwd());
    mail = await startMailServer({ users: ['alice'] });
    service = await startService({ workerEnv: { GATEWAY_LEASE_TTL_SECONDS: '15' } });
  }, 900_000);

  afterEach((ctx) => {
    dumpLogsOnFailure(ctx, service);
    if (ctx.task.result?.state === 'fail') console.error(`--- image gateway log ---\n${log.slice(-40).join('\n')}`);
  });

  afterAll(async () => {
    const pid = gatewayPid();
    if (pid) process.kill(pid, 'SIGKILL');
    run?.kill('SIGKILL');
    if (container) spawnSync('buildah', ['rm', container]);
    spawnSync('buildah', ['rmi', GATEWAY_IMAGE, BASE_IMAGE]);
    await service?.stop();
    await mail?.stop();
  });

  it('is under 200 MB, runs as a user other than root, stops on SIGTERM and checks its health', () => {
    const images = JSON.parse(buildah(['images', '--json'])) as { names?: string[]; size: number | string }[];
    const image = images.find((i) => i.names?.some((n) => n.startsWith(GATEWAY_IMAGE)));
    expect(image).toBeDefined();
    const size = bytesOf(image!.size);
    console.log(`gateway image: ${(size / 1e6).toFixed(1)} MB`);
    expect(size).toBeLessThan(200e6);
    const config = imageConfig();
    expect(config.User).toBe('node');
    expect(config.StopSignal).toBe('SIGTERM');
    expect(config.Healthcheck?.Test.join(' ')).toContain('/healthz');
    expect(config.Cmd).toEqual(['node', '--max-semi-space-size=1', '--optimize-for-size', 'dist/gateway/main.mjs']);
    expect(config.Env).toContain('GLIBC_TUNABLES=glibc.malloc.mmap_threshold=8192:glibc.malloc.trim_threshold=131072');
    container = buildah(['from', GATEWAY_IMAGE]).trim();
    const uid = buildah(['run', '--isolation', 'chroot', container, '--', 'node', '-p', 'process.getuid()']).trim();
    expect(uid).not.toBe('0');
    // Only the bundle and the packages it loads at run time: no zod, no hono, no imapflow sources.
    const modules = buildah([
      'run',
      '--isolation',
      'chroot',
      container,
      '--',
      'node',
      '-p',
      "require('fs').readdirSync('/app/node_modules').join(' ')",
    ]);
    expect(modules).toContain('nodemailer');
    expect(modules).toContain('prom-client');
    expect(modules).not.toMatch(/\b(zod|hono|imapflow|esbuild)\b/);
  });

  it('holds an account, relays a new message to the API, and hands the account back on SIGTERM', async () => {
    expect(container).not.toBeNull();
    const port = await freePort();
    const config = imageConfig();
    const env = {
      WORKER_URL: service.base,
      GATEWAY_SECRET: service.gatewaySecret,
      GATEWAY_ID,
      GATEWAY_HTTP_PORT: String(port),
      GATEWAY_HTTP_HOST: '127.0.0.1',
      NODE_EXTRA_CA_CERTS: '/run/mail-ca.pem',
      // The test's Dovecot listens on loopback, which a gateway refuses unless told otherwise.
      ALLOW_PRIVATE_MAIL_HOSTS: 'true',
    };
    run = spawn(
      'buildah',
      [
        'run',
        '--isolation',
        'chroot',
        '--workingdir',
        config.WorkingDir,
        '--volume',
        `${mail.caFile}:/run/mail-ca.pem:ro`,
        ...Object.entries(env).flatMap(([k, v]) => ['--env', `${k}=${v}`]),
        container!,
        '--',
        ...config.Cmd,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    for (const stream of [run.stdout, run.stderr])
      stream?.on('data', (chunk: Buffer) => log.push(...chunk.toString('utf8').split('\n').filter(Boolean)));
    const exited = new Promise<number | null>((resolve) => run!.once('exit', (code) => resolve(code)));

    await eventually(async () => (await healthz(`http://127.0.0.1:${port}`)).status === 200, {
      what: "the image's gateway healthy",
      timeoutMs: 60_000,
      intervalMs: 250,
    });
    const account = await connectMailbox(service, mail, 'alice');
    await eventually(
      () =>
        service.query<{ gateway_id: string | null }>('SELECT gateway_id FROM accounts WHERE id = ?', account.id)[0]
          ?.gateway_id === GATEWAY_ID,
      { what: 'the account held by the gateway in the image', timeoutMs: 30_000 },
    );
    await mail.deliver({ from: 'ann@remote.test', to: 'alice@example.test', subject: 'through the image', text: 'hi' });
    await eventually(
      async () => (await service.listEmails(account.id)).some((e) => e.subject === 'through the image'),
      {
        what: 'the new message in the API',
        timeoutMs: 60_000,
        intervalMs: 500,
      },
    );
    // Each log line is a JSON object (the image's GATEWAY_LOG_FORMAT).
    expect(log.filter((line) => line.startsWith('{')).length).toBeGreaterThan(3);

    // What `docker stop` does: the STOPSIGNAL to the container's process.
    const pid = gatewayPid();
    expect(pid).not.toBeNull();
    process.kill(pid!, 'SIGTERM');
    await eventually(
      () =>
        service.query<{ gateway_id: string | null }>('SELECT gateway_id FROM accounts WHERE id = ?', account.id)[0]
          ?.gateway_id === null,
      { what: 'the account released', timeoutMs: 10_000, intervalMs: 200 },
    );
    expect(await exited).toBe(0);
    expect(log.some((line) => line.includes('leases released'))).toBe(true);
  });
});
