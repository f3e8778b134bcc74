/** The part of node:zlib the Worker uses (nodejs_compat has it; the Worker is typed with Cloudflare's types only). */
declare module 'node:zlib' {
  interface ZlibOptions {
    dictionary?: ArrayBufferView;
    level?: number;
  }
  export function deflateRawSync(data: string | ArrayBufferView, options?: ZlibOptions): Uint8Array;
  export function inflateRawSync(data: ArrayBufferView, options?: ZlibOptions): { toString(encoding: 'utf8'): string };
}
