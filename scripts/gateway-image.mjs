#!/usr/bin/env node
// What the gateway image holds (the Dockerfile's build stage runs this): the esbuild bundle in
// <outdir>/dist/gateway/main.mjs and, in <outdir>/node_modules, only the packages the bundle loads at
// run time (build-gateway.mjs RUNTIME_PACKAGES) with their own dependencies, as npm installed them.
// `node scripts/gateway-image.mjs <outdir>`.
import { cpSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildGateway, RUNTIME_PACKAGES } from './build-gateway.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/**
 * The packages `names` need, found as Node would from `fromDir` (nested node_modules first, then
 * the top one): directories relative to the project.
 */
export function runtimeClosure(names) {
  const found = new Set();
  const visit = (name, fromDir) => {
    for (let dir = fromDir; ; dir = dirname(dirname(dir))) {
      const candidate = join(dir, 'node_modules', name);
      if (existsSync(join(candidate, 'package.json'))) {
        if (found.has(candidate)) return;
        found.add(candidate);
        const pkg = JSON.parse(readFileSync(join(candidate, 'package.json'), 'utf8'));
        for (const dep of Object.keys({ ...pkg.dependencies, ...pkg.optionalDependencies })) visit(dep, candidate);
        return;
      }
      if (dir === root) {
        if (names.includes(name)) throw new Error(`${name} is not installed: run npm ci first`);
        return; // an optional dependency npm left out on this platform
      }
    }
  };
  for (const name of names) visit(name, root);
  return [...found].map((dir) => dir.slice(root.length + 1)).sort();
}

export async function prepareImageFiles(outdir) {
  mkdirSync(join(outdir, 'dist', 'gateway'), { recursive: true });
  await buildGateway(join(outdir, 'dist', 'gateway', 'main.mjs'));
  const packages = runtimeClosure(RUNTIME_PACKAGES);
  for (const dir of packages) cpSync(join(root, dir), join(outdir, dir), { recursive: true, dereference: true });
  return packages;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (!process.argv[2]) throw new Error('usage: node scripts/gateway-image.mjs <outdir>');
  const packages = await prepareImageFiles(process.argv[2]);
  console.log(`gateway image files: the bundle and ${packages.length} packages`);
}
