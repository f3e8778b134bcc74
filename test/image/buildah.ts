/**
 * The gateway image for tests, with Debian's buildah (no registry needed): a Node 24 base image made
 * from the project's own Node binary (node_modules/node) and the Debian libraries it links, plus a
 * shell, env and npm for the Dockerfile's build stage; then the Dockerfile built on it. As root,
 * chroot isolation and the host's network (the sandbox refuses what podman run asks for).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

export const BASE_IMAGE = 'localhost/mailbox-node-base:test';
export const GATEWAY_IMAGE = 'localhost/mailbox-gateway:test';

/** Why the image cannot be built here (null: it can), after installing buildah when missing. */
export function buildahUnavailable(): string | null {
  if (process.getuid?.() !== 0) return 'building images with buildah needs root';
  if (spawnSync('buildah', ['--version']).status === 0) return null;
  const install = spawnSync('apt-get', ['install', '-y', '--no-install-recommends', 'buildah'], {
    encoding: 'utf8',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  if (spawnSync('buildah', ['--version']).status === 0) return null;
  return `buildah is not installed and apt-get could not install it: ${install.stderr.slice(-300)}`;
}

export function buildah(args: string[], options: { input?: string } = {}): string {
  return execFileSync('buildah', args, { encoding: 'utf8', input: options.input, maxBuffer: 64 * 1024 * 1024 });
}

/** The shared libraries an executable links, as ldd resolves them on this host. */
function linkedLibraries(executable: string): string[] {
  const out = execFileSync('ldd', [executable], { encoding: 'utf8' });
  return [...out.matchAll(/(\/\S+\.so[.\d]*)/g)].map((m) => m[1]!);
}

function copyInto(rootfs: string, path: string, as = path): void {
  if (existsSync(join(rootfs, as))) return;
  mkdirSync(join(rootfs, dirname(as)), { recursive: true });
  cpSync(path, join(rootfs, as), { dereference: true, recursive: true });
}

/** A minimal root filesystem with Node 24, /bin/sh, env and npm; a user `node` (1000) as in Node's images. */
function makeRootfs(projectRoot: string): string {
  const rootfs = mkdtempSync(join(tmpdir(), 'mailbox-node-rootfs-'));
  const node = join(projectRoot, 'node_modules', 'node', 'bin', 'node');
  copyInto(rootfs, node, '/usr/local/bin/node');
  copyInto(rootfs, '/bin/dash', '/bin/sh');
  copyInto(rootfs, '/usr/bin/env');
  for (const binary of [node, '/bin/dash', '/usr/bin/env'])
    for (const lib of linkedLibraries(binary)) copyInto(rootfs, lib);
  // npm for the build stage (any recent npm runs on Node 24), trusting the same CAs as this host.
  const npm = dirname(
    execFileSync(
      'node',
      [
        '-p',
        "require.resolve('npm/package.json', { paths: ['/usr/lib/node_modules', '/usr/local/lib/node_modules', '/usr/share/nodejs'] })",
      ],
      {
        encoding: 'utf8',
      },
    ).trim(),
  );
  copyInto(rootfs, npm, '/usr/local/lib/node_modules/npm');
  symlinkSync('../lib/node_modules/npm/bin/npm-cli.js', join(rootfs, 'usr/local/bin/npm'));
  if (existsSync('/etc/ssl/certs/ca-certificates.crt')) copyInto(rootfs, '/etc/ssl/certs/ca-certificates.crt');
  mkdirSync(join(rootfs, 'usr/local/etc'), { recursive: true });
  writeFileSync(
    join(rootfs, 'usr/local/etc/npmrc'),
    'cafile=/etc/ssl/certs/ca-certificates.crt\nupdate-notifier=false\n',
  );
  writeFileSync(
    join(rootfs, 'etc/passwd'),
    'root:x:0:0:root:/root:/bin/sh\nnode:x:1000:1000:node:/home/node:/bin/sh\n',
  );
  writeFileSync(join(rootfs, 'etc/group'), 'root:x:0:\nnode:x:1000:\n');
  for (const dir of ['root', 'home/node', 'tmp']) mkdirSync(join(rootfs, dir), { recursive: true });
  chmodSync(join(rootfs, 'tmp'), 0o1777);
  return rootfs;
}

/** Builds the Node base image from this host's files (once per run; replaces an older one). */
export function buildNodeBase(projectRoot: string): void {
  const rootfs = makeRootfs(projectRoot);
  try {
    const container = buildah(['from', 'scratch']).trim();
    try {
      buildah(['copy', container, `${rootfs}/`, '/']);
      buildah(['config', '--env', 'PATH=/usr/local/bin:/usr/bin:/bin', '--cmd', 'node', container]);
      buildah([
        'run',
        '--isolation',
        'chroot',
        container,
        '--',
        'node',
        '-e',
        "require('fs').chownSync('/home/node', 1000, 1000)",
      ]);
      buildah(['commit', '--rm', container, BASE_IMAGE]);
    } catch (err) {
      spawnSync('buildah', ['rm', container]);
      throw err;
    }
  } finally {
    rmSync(rootfs, { recursive: true, force: true });
  }
}

/** `buildah bud` of the project's Dockerfile on the base image. */
export function buildGatewayImage(projectRoot: string): string {
  return buildah([
    'bud',
    '--isolation',
    'chroot',
    '--format',
    'docker',
    '--build-arg',
    `NODE_IMAGE=${BASE_IMAGE}`,
    '-t',
    GATEWAY_IMAGE,
    projectRoot,
  ]);
}
