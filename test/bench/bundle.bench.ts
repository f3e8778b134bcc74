/**
 * `npm run bench bundle`: the Worker's bundle against Cloudflare's limits. Its size as `wrangler
 * deploy` uploads it, compressed (limit 3 MB on Workers Free, 10 MB on Paid), and its start-up: the
 * CPU time of parsing and running the global scope, from `wrangler check startup`'s profile of the
 * Worker in local workerd (limit 1 s; a local CPU differs from Cloudflare's, so read it as an order
 * of magnitude). Prints numbers; asserts nothing.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUNDLE_LIMITS, buildBundle } from '../../scripts/deploy.mjs';

const STARTUP_LIMIT_MS = 1000;
const RUNS = 3;

interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string } }[];
  samples: number[];
  timeDeltas: number[];
}

/** One `wrangler check startup`: milliseconds of the profile spent other than idle. */
function startupMs(): number {
  const dir = mkdtempSync(join(tmpdir(), 'mailbox-startup-'));
  try {
    const outfile = join(dir, 'startup.cpuprofile');
    const run = spawnSync('npx', ['wrangler', 'check', 'startup', '--outfile', outfile], { encoding: 'utf8' });
    if (run.status !== 0) throw new Error(`wrangler check startup failed:\n${run.stdout}${run.stderr}`);
    const profile = JSON.parse(readFileSync(outfile, 'utf8')) as CpuProfile;
    const idle = new Set(profile.nodes.filter((n) => n.callFrame.functionName === '(idle)').map((n) => n.id));
    let active = 0;
    profile.samples.forEach((node, i) => {
      if (!idle.has(node)) active += profile.timeDeltas[i] ?? 0;
    });
    return active / 1000;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(2)} MiB`;

export async function run(): Promise<void> {
  const bundle = buildBundle();
  console.log(
    `bundle: ${mib(bundle.raw)} raw, ${mib(bundle.compressed)} gzip-compressed: ` +
      `${((bundle.compressed / BUNDLE_LIMITS.free) * 100).toFixed(1)}% of the Free limit (${mib(BUNDLE_LIMITS.free)}), ` +
      `${((bundle.compressed / BUNDLE_LIMITS.paid) * 100).toFixed(1)}% of the Paid limit (${mib(BUNDLE_LIMITS.paid)})`,
  );
  const times = Array.from({ length: RUNS }, startupMs).sort((a, b) => a - b);
  console.log(
    `startup (global scope, local workerd, ${RUNS} runs): ${times.map((t) => `${t.toFixed(0)} ms`).join(', ')}; ` +
      `median ${((times[1]! / STARTUP_LIMIT_MS) * 100).toFixed(0)}% of Cloudflare's ${STARTUP_LIMIT_MS} ms limit`,
  );
}
