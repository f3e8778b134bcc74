/**
 * The gateway bundle leaves iconv-lite, encoding-japanese and pino in node_modules and loads them on
 * first use (gateway/lazy/, scripts/build-gateway.mjs): nothing of theirs runs while imapflow merely
 * imports them, and once used they behave as the real modules do, whether read as a module or called.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildGateway } from '../../scripts/build-gateway.mjs';

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

  it('bundles them out of the gateway, and they work from node_modules once used', async () => {
    const bundle = readBundle(join(root, 'gateway', 'main.ts'));
    for (const name of ['iconv-lite', 'encoding-japanese', 'pino']) {
      expect(bundle, name).toContain(`__require("${name}")`);
    }
    // The tables of the real packages are not in the bundle.
    expect(bundle).not.toContain('JIS_TO_UTF8');
    // Nor zod: the gateway checks the Worker's messages without it (a value import of
    // common/relay.ts from gateway/ would bring its 9 MiB back; import types only).
    expect(bundle).not.toMatch(/ZodError|\$ZodType/);

    // What imapflow does: import them all when it loads, and use them later.
    // Inside the tree (dist/ is git-ignored), so that the bundle finds node_modules as the gateway's does.
    mkdirSync(join(root, 'dist'), { recursive: true });
    const dir = mkdtempSync(join(root, 'dist', 'lazy-probe-'));
    try {
      const probe = join(dir, 'probe.ts');
      writeFileSync(
        probe,
        [
          "import iconv from 'iconv-lite';",
          "import encoding from 'encoding-japanese';",
          "import pino from 'pino';",
          "import { createRequire } from 'node:module';",
          'const loaded = () => Object.keys(createRequire(import.meta.url).cache).filter((f) => /node_modules\\/(iconv-lite|encoding-japanese|pino)\\//.test(f)).length;',
          'const before = loaded();',
          "const folder = iconv.encode('Entwürfe', 'utf-7-imap').toString();",
          "const text = encoding.convert([0x82, 0xa0], { to: 'UNICODE', from: 'SJIS', type: 'string' });",
          "const level = pino({ level: 'warn' }).level;",
          'console.log(JSON.stringify({ before, after: loaded(), folder, text, level }));',
        ].join('\n'),
      );
      const out = join(dir, 'probe.mjs');
      await buildGateway(out, probe);
      const run = spawnSync(process.execPath, [out], { encoding: 'utf8' });
      expect(run.status, run.stderr).toBe(0);
      expect(JSON.parse(run.stdout.trim())).toEqual({
        before: 0,
        after: expect.any(Number),
        folder: 'Entw&APw-rfe',
        text: 'あ',
        level: 'warn',
      });
      expect(JSON.parse(run.stdout.trim()).after).toBeGreaterThanOrEqual(3);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('is imported by imapflow and libmime only in the forms the stand-ins serve (default import, require)', () => {
    const named =
      /import\s*(\*\s*as\s+\w+|\{[^}]*\}|\w+\s*,\s*\{[^}]*\})\s*from\s*['"](iconv-lite|encoding-japanese|pino)['"]/;
    const destructured = /\{[^}]*\}\s*=\s*require\(['"](iconv-lite|encoding-japanese|pino)['"]\)/;
    const dirs = ['imapflow/dist/esm', 'libmime/lib'].map((dir) => join(root, 'node_modules', dir));
    let importers = 0;
    for (const dir of dirs) {
      for (const file of readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.js'))) {
        const text = readFileSync(join(dir, file), 'utf8');
        if (/['"](iconv-lite|encoding-japanese|pino)['"]/.test(text)) importers++;
        expect(text, `${dir}/${file}`).not.toMatch(named);
        expect(text, `${dir}/${file}`).not.toMatch(destructured);
      }
    }
    expect(importers).toBeGreaterThanOrEqual(4);
  });
});

function readBundle(entry: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'gateway-bundle-'));
  try {
    const out = join(dir, 'main.mjs');
    const built = spawnSync(process.execPath, [join(root, 'scripts', 'build-gateway.mjs'), out, entry], {
      encoding: 'utf8',
    });
    expect(built.status, built.stderr).toBe(0);
    return readFileSync(out, 'utf8');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
