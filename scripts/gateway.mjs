#!/usr/bin/env node
// The gateway as operators run it (`npm run gateway`, and the gateway `npm start` launches): builds
// gateway/main.ts into one JavaScript file with esbuild (dist/gateway/, git-ignored; about a second,
// at every start so it is never stale) and runs it in this very process. The bundle starts about
// 40 MiB smaller than the .ts sources under Node's type stripping (README "Known limits"). nodemailer
// stays outside the bundle: it is loaded from node_modules on the first send or draft. Without
// esbuild (`npm install --omit=dev`) the sources run as they are.
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
  const result = spawnSync(
    esbuild,
    [
      source,
      '--bundle',
      '--platform=node',
      '--format=esm',
      '--target=node22',
      '--log-level=warning',
      `--outfile=${temporary}`,
      '--external:nodemailer',
      // Dependencies that imapflow loads but the gateway (almost) never uses are loaded on first use:
      // gateway/lazy/ says why for each.
      '--alias:encoding-japanese=./gateway/lazy/encoding-japanese.cjs',
      '--alias:pino=./gateway/lazy/pino.cjs',
      // Without comments and blank space the source V8 keeps in memory is a third smaller (and all
      // ASCII, one byte a character): about 8 MiB less RSS. Names are kept, so stack traces still read.
      '--minify-whitespace',
      '--minify-syntax',
      '--legal-comments=none',
      // CommonJS dependencies call require() for Node's built-in modules.
      "--banner:js=import { createRequire as __gatewayRequire } from 'node:module'; const require = __gatewayRequire(import.meta.url);",
    ],
    { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] },
  );
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
