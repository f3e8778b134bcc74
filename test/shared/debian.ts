/** Installing what the tests run (Dovecot, Postfix, Chromium) from Debian's packages when it is missing. */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { promisify } from 'node:util';

const execFileP = promisify(execFile);

async function aptGet(args: string[], env: NodeJS.ProcessEnv): Promise<void> {
  try {
    await execFileP('apt-get', args, { env, timeout: 600_000, maxBuffer: 64 << 20 });
  } catch (err) {
    const e = err as Error & { stderr?: string; stdout?: string };
    throw new Error(`apt-get ${args.join(' ')} failed: ${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`);
  }
}

/**
 * Installs `packages` unless every file of `binaries` exists. Needs root. `prepare` runs first (for
 * debconf answers). Stale or missing package lists are refreshed once.
 */
export async function ensureDebianPackages(
  binaries: string[],
  packages: string[],
  prepare?: (env: NodeJS.ProcessEnv) => Promise<void>,
): Promise<void> {
  if (binaries.every((f) => fs.existsSync(f))) return;
  if (process.getuid?.() !== 0)
    throw new Error(`${binaries.join(', ')} missing and not root: apt-get install ${packages.join(' ')}`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  await prepare?.(env);
  const install = () => aptGet(['install', '-y', '--no-install-recommends', ...packages], env);
  try {
    await install();
  } catch {
    await aptGet(['update'], env);
    await install();
  }
}
