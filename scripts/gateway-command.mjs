// The gateway's command line, read from package.json's "gateway" script (`npm run gateway`), so that
// `npm start` and the memory benchmark run the gateway exactly as operators do: its environment
// assignments (glibc's malloc settings) and the node arguments (V8 flags, then scripts/gateway.mjs).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** @returns {{ env: Record<string, string>, args: string[] }} */
export function gatewayCommand(root) {
  const script = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).scripts.gateway;
  const words = script.trim().split(/\s+/);
  const node = words.indexOf('node');
  if (node < 0) throw new Error(`package.json's gateway script does not run node: ${script}`);
  const env = Object.fromEntries(
    words.slice(0, node).map((word) => [word.slice(0, word.indexOf('=')), word.slice(word.indexOf('=') + 1)]),
  );
  return { env, args: words.slice(node + 1).map((arg) => (arg.startsWith('scripts/') ? join(root, arg) : arg)) };
}
