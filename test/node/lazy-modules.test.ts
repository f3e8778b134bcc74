/**
 * The gateway bundle loads encoding-japanese and pino on first use (gateway/lazy/, aliased by
 * scripts/gateway.mjs): nothing of theirs runs while imapflow merely imports them, and once used they
 * behave as the real modules do, whether read as a module (`default.convert`) or called (`pino()`).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const require = createRequire(import.meta.url);
const { lazyModule } = require('../../gateway/lazy/lazy-module.cjs') as {
  lazyModule: <T>(load: () => T) => T;
};
const root = join(import.meta.dirname, '..', '..');

describe('dependencies the gateway bundle loads on first use', () => {
  it('loads a module only when a property is read or it is called, then passes both through', () => {
    const loads: string[] = [];
    const real = Object.assign((x: number) => x * 2, { version: '1.2.3' });
    const lazy = lazyModule(() => {
      loads.push('loaded');
      return real;
    });
    expect((lazy as unknown as { __esModule?: boolean }).__esModule).toBeUndefined();
    expect(loads).toEqual([]);
    expect(lazy(21)).toBe(42);
    expect(lazy.version).toBe('1.2.3');
    expect(loads).toEqual(['loaded']);
  });

  it('bundles imports of encoding-japanese and pino that work, without loading either at import', () => {
    const dir = mkdtempSync(join(tmpdir(), 'lazy-bundle-'));
    const entry = join(root, 'gateway', `.lazy-probe-${process.pid}.ts`);
    // What imapflow does: import both at load, use them later (the probe measures the heap around the first use).
    writeFileSync(
      entry,
      [
        "import encoding from 'encoding-japanese';",
        "import pino from 'pino';",
        'const before = process.memoryUsage().heapUsed;',
        'const text = encoding.convert([0x82, 0xa0], { to: "UNICODE", from: "SJIS", type: "string" });',
        'const logger = pino({ level: "warn" });',
        'console.log(JSON.stringify({ text, level: logger.level, before, after: process.memoryUsage().heapUsed }));',
      ].join('\n'),
    );
    try {
      const esbuild = join(root, 'node_modules', 'esbuild', 'bin', 'esbuild');
      const out = join(dir, 'probe.mjs');
      const built = spawnSync(
        esbuild,
        [
          entry,
          '--bundle',
          '--platform=node',
          '--format=esm',
          `--outfile=${out}`,
          '--log-level=warning',
          ...gatewayAliases(),
          "--banner:js=import { createRequire as __r } from 'node:module'; const require = __r(import.meta.url);",
        ],
        { cwd: root, encoding: 'utf8' },
      );
      expect(built.status, built.stderr).toBe(0);
      const bundle = readFileSync(out, 'utf8');
      // The real modules are in the bundle, behind the stand-ins.
      expect(bundle).toContain('lazyModule');
      const run = spawnSync(process.execPath, [out], { encoding: 'utf8' });
      expect(run.status, run.stderr).toBe(0);
      const result = JSON.parse(run.stdout.trim()) as { text: string; level: string; before: number; after: number };
      expect(result.text).toBe('あ');
      expect(result.level).toBe('warn');
      // Loading encoding-japanese builds its tables: the heap grows by more than a MiB at first use.
      expect(result.after - result.before).toBeGreaterThan(1024 * 1024);
    } finally {
      spawnSync('rm', ['-f', entry]);
    }
  });
});

/** The --alias arguments scripts/gateway.mjs gives esbuild. */
function gatewayAliases(): string[] {
  const script = readFileSync(join(root, 'scripts', 'gateway.mjs'), 'utf8');
  const aliases = [...script.matchAll(/'(--alias:[^']+)'/g)].map((m) => m[1]!);
  expect(aliases.length).toBeGreaterThanOrEqual(2);
  return aliases;
}
