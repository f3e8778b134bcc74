#!/usr/bin/env node
// The gateway as operators run it (`npm run gateway`, and the gateway `npm start` launches): builds
// gateway/main.ts into one JavaScript file with esbuild (scripts/build-gateway.mjs, in a child
// process; dist/gateway/, git-ignored; about a second, at every start so it is never stale) and runs
// it in this very process. The bundle starts about 40 MiB smaller than the .ts sources under Node's
// type stripping (docs/capacity-and-limits.md); what it leaves to load from node_modules on first use:
// see build-gateway.mjs. Without esbuild (`npm install --omit=dev`) the sources run as they are.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const source = join(root, 'gateway', 'main.ts');
const esbuild = join(root, 'node_modules', 'esbuild', 'bin', 'esbuild');

/** Builds the bundle and returns its path; null when esbuild is not installed. */
function build() {
  if (!existsSync(esbuild)) return null;
  const outDir = join(root, 'dist', 'gateway');
  mkdirSync(outDir, { recursive: true });
  const target = join(outDir, 'main.mjs');
  // Several gateways may start at once (tests, a fleet on one host): each writes its own file and
  // renames it into place, so none ever imports a half-written bundle.
  const temporary = join(outDir, `main.${process.pid}.tmp.mjs`);
  const result = spawnSync(process.execPath, [join(root, 'scripts', 'build-gateway.mjs'), temporary], {
    cwd: root,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  if (result.status !== 0) {
    rmSync(temporary, { force: true });
    console.error(`[gateway] building ${source} failed${result.error ? `: ${result.error.message}` : ''}`);
    process.exit(1);
  }
  renameSync(temporary, target);
  return target;
}

const entry = build() ?? source;
await import(pathToFileURL(entry).href);
