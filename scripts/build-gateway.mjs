#!/usr/bin/env node
// Builds the gateway bundle (scripts/gateway.mjs runs this in a child process, so that esbuild's
// code never loads into the gateway): gateway/main.ts and its dependencies in one JavaScript file.
// `node scripts/build-gateway.mjs <outfile>`.
//
// Left out of the bundle and loaded from node_modules when first needed:
// - nodemailer, by the first send or draft (gateway/smtp.ts imports it dynamically);
// - prom-client, when GATEWAY_HTTP_PORT asks for metrics (gateway/metrics.ts);
// - the packages in LAZY, which imapflow imports when it loads but the gateway uses rarely or never:
//   imapflow's imports of them get the stand-ins in gateway/lazy/ (each says what it saves), which
//   require the real package on first use.
import { realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const lazyDir = join(root, 'gateway', 'lazy');
const LAZY = ['iconv-lite', 'encoding-japanese', 'pino'];
/** Left out of the bundle: loaded from node_modules when first needed (prom-client: only with GATEWAY_HTTP_PORT). */
const EXTERNAL = ['nodemailer', 'prom-client'];
/** Every package the bundle may load at run time: what a gateway image holds besides the bundle. */
export const RUNTIME_PACKAGES = [...EXTERNAL, ...LAZY];

/**
 * Imports of a LAZY package go to its stand-in; the stand-in's own import stays a runtime require,
 * which finds the copy in the top node_modules: the build fails if an importer would get another.
 */
const lazyPackages = {
  name: 'lazy-packages',
  setup(build) {
    const filter = new RegExp(`^(${LAZY.join('|')})$`);
    build.onResolve({ filter }, async (args) => {
      if (args.pluginData === 'resolving') return undefined;
      if (args.importer === join(lazyDir, `${args.path}.cjs`)) return { path: args.path, external: true };
      const real = await build.resolve(args.path, {
        kind: args.kind,
        resolveDir: args.resolveDir,
        pluginData: 'resolving',
      });
      // Real paths: node_modules may be a link (a worktree sharing another's).
      const top = realpathSync(join(root, 'node_modules', args.path));
      if (real.errors.length || !real.path.startsWith(`${top}/`))
        return { errors: [{ text: `${args.importer} would get ${real.path || args.path}, not ${top}: update LAZY` }] };
      return { path: join(lazyDir, `${args.path}.cjs`) };
    });
  },
};

/** Bundles `entry` (the gateway by default; tests bundle probes the same way) into `outfile`. */
export async function buildGateway(outfile, entry = join(root, 'gateway', 'main.ts')) {
  await build({
    entryPoints: [entry],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node22',
    logLevel: 'warning',
    outfile,
    external: EXTERNAL,
    plugins: [lazyPackages],
    // Without comments and blank space the source V8 keeps in memory is a third smaller (and all
    // ASCII, one byte a character): about 8 MiB less RSS. Names are kept, so stack traces still read.
    minifyWhitespace: true,
    minifySyntax: true,
    legalComments: 'none',
    // CommonJS dependencies call require() for Node's built-in modules and the lazy packages.
    banner: {
      js: "import { createRequire as __gatewayRequire } from 'node:module'; const require = __gatewayRequire(import.meta.url);",
    },
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await buildGateway(process.argv[2], process.argv[3]);
