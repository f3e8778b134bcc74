#!/usr/bin/env node
// Builds the dashboard (dashboard/) into dist/dashboard, which wrangler serves as static assets
// (wrangler.toml [assets]). wrangler runs this before every `wrangler dev` (so `npm start`) and
// `wrangler deploy` through its [build] hook; the worker tests run it from their vitest config.
// Output is deterministic and each file is replaced atomically, and only when it changed, so two
// builds at once (tests in parallel) never leave a half-written file behind.
import { build } from 'esbuild';
import { mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'dist', 'dashboard');

function put(name, bytes) {
  const target = join(out, name);
  try {
    if (Buffer.compare(readFileSync(target), bytes) === 0) return;
  } catch {
    // not there yet
  }
  const temp = `${target}.${process.pid}.tmp`;
  writeFileSync(temp, bytes);
  renameSync(temp, target);
}

const bundle = await build({
  entryPoints: [join(root, 'dashboard', 'src', 'main.tsx')],
  bundle: true,
  format: 'esm',
  target: 'es2022',
  minify: true,
  legalComments: 'none',
  jsx: 'automatic',
  jsxImportSource: 'hono/jsx/dom',
  write: false,
  outfile: join(out, 'app.js'),
  logLevel: 'warning',
});

mkdirSync(out, { recursive: true });
for (const file of bundle.outputFiles) put('app.js', Buffer.from(file.contents));
const pub = join(root, 'dashboard', 'public');
for (const name of readdirSync(pub)) put(name, readFileSync(join(pub, name)));
