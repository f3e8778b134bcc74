/**
 * Debian packages that cannot be installed next to Dovecot (courier-imap and cyrus-imapd conflict
 * with dovecot-imapd), fetched with `apt-get download` and unpacked with `dpkg-deb -x` into a cache
 * directory, never installed: dpkg's database and /etc stay as they are.
 *
 * Their library dependencies that the machine lacks are fetched and unpacked too (Depends starting
 * with `lib`, followed recursively, alternatives resolved to the first real package); the daemons
 * find them through LD_LIBRARY_PATH (`libraryPath`). The cache is keyed by the package list, filled
 * once (a temp dir renamed into place, so concurrent test processes never see half an unpack) and
 * reused by later runs: `TEST_SERVERS_CACHE` moves it (default /var/cache/mailbox-edge-test-servers).
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const execFileP = promisify(execFile);

export interface UnpackedPackages {
  /** The unpacked file tree: `<root>/usr/...`, `<root>/etc/...`. */
  root: string;
  /** For LD_LIBRARY_PATH: every directory of the tree that holds shared libraries. */
  libraryPath: string;
}

/** Dependencies never fetched: only needed by tools the tests do not run (cyr_virusscan). */
const SKIPPED = new Set(['libclamav12']);

async function cmd(file: string, args: string[], opts: { cwd?: string } = {}): Promise<string> {
  try {
    const { stdout } = await execFileP(file, args, {
      ...opts,
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive', LC_ALL: 'C' },
      timeout: 600_000,
      maxBuffer: 64 << 20,
    });
    return stdout;
  } catch (err) {
    const e = err as Error & { stderr?: string };
    throw new Error(`${file} ${args.join(' ')} failed: ${e.message}\n${e.stderr ?? ''}`);
  }
}

async function installed(pkg: string): Promise<boolean> {
  const status = await cmd('dpkg-query', ['-W', '-f=$' + '{Status}', pkg]).catch(() => '');
  return status.includes('install ok installed');
}

/** `packages` plus the library packages they need and the machine does not have. */
async function withMissingLibraries(packages: string[]): Promise<string[]> {
  const wanted = new Set(packages);
  const queue = [...packages];
  while (queue.length) {
    const pkg = queue.shift()!;
    const out = await cmd('apt-cache', [
      'depends',
      '--no-recommends',
      '--no-suggests',
      '--no-conflicts',
      '--no-breaks',
      '--no-replaces',
      '--no-enhances',
      pkg,
    ]);
    // "  |Depends: a" continues an alternative group that ends with a line without the bar.
    let group: string[] = [];
    for (const line of out.split('\n')) {
      const m = /^\s+(\|)?(?:Pre)?Depends: (\S+)/.exec(line);
      if (!m) continue;
      group.push(m[2]!);
      if (m[1]) continue;
      const choices = group;
      group = [];
      const real = choices.filter((c) => !c.startsWith('<')).map((c) => c.replace(/:any$/, ''));
      if (real.some((c) => wanted.has(c))) continue;
      const lib = real.find((c) => c.startsWith('lib'));
      if (!lib || SKIPPED.has(lib)) continue;
      let present = false;
      for (const c of real) if (await installed(c)) present = true;
      if (present) continue;
      wanted.add(lib);
      queue.push(lib);
    }
  }
  return [...wanted].sort();
}

function cacheBase(): string {
  return process.env.TEST_SERVERS_CACHE ?? '/var/cache/mailbox-edge-test-servers';
}

function libraryDirs(root: string): string[] {
  const dirs = ['lib/x86_64-linux-gnu', 'usr/lib/x86_64-linux-gnu', 'usr/lib'].map((d) => path.join(root, d));
  return dirs.filter((d) => fs.existsSync(d));
}

/**
 * Unpack `packages` (and missing libraries) unless the cache already holds them; `mustHave` are
 * paths inside the tree that prove the unpack is usable. Needs root and the Debian mirror on the
 * first call only.
 */
export async function ensureUnpacked(name: string, packages: string[], mustHave: string[]): Promise<UnpackedPackages> {
  const key = createHash('sha256').update(packages.join(' ')).digest('hex').slice(0, 12);
  const root = path.join(cacheBase(), `${name}-${key}`);
  const result = () => ({ root, libraryPath: libraryDirs(root).join(':') });
  const complete = () => mustHave.every((f) => fs.existsSync(path.join(root, f)));
  if (complete()) return result();
  if (process.getuid?.() !== 0) throw new Error(`${name} is not unpacked in ${root} and this is not root`);

  fs.mkdirSync(cacheBase(), { recursive: true });
  const work = fs.mkdtempSync(path.join(cacheBase(), `.${name}-`));
  try {
    const debs = path.join(work, 'debs');
    const tree = path.join(work, 'root');
    fs.mkdirSync(debs);
    fs.mkdirSync(tree);
    // apt-get download writes as the _apt user where it can: let it.
    fs.chmodSync(work, 0o755);
    fs.chmodSync(debs, 0o777);
    let list: string[];
    try {
      list = await withMissingLibraries(packages);
      await cmd('apt-get', ['download', ...list], { cwd: debs });
    } catch {
      await cmd('apt-get', ['update']);
      list = await withMissingLibraries(packages);
      await cmd('apt-get', ['download', ...list], { cwd: debs });
    }
    for (const deb of fs.readdirSync(debs).filter((f) => f.endsWith('.deb')))
      await cmd('dpkg-deb', ['-x', path.join(debs, deb), tree]);
    fs.writeFileSync(path.join(tree, 'PACKAGES'), `${list.join('\n')}\n`);
    if (fs.existsSync(root) && !complete()) fs.rmSync(root, { recursive: true, force: true });
    try {
      fs.renameSync(tree, root);
    } catch (err) {
      // Another process finished first: use its tree.
      if (!complete()) throw err;
    }
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
  const missing = mustHave.filter((f) => !fs.existsSync(path.join(root, f)));
  if (missing.length) throw new Error(`${name}: unpacked ${root}, but ${missing.join(', ')} missing`);
  return result();
}
