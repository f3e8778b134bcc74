/** Worker-side WebCrypto helpers: base64, random tokens, AES-GCM for secrets at rest (hashing and HMAC: common/crypto.ts). */

import { encodeBase32 } from './ids.ts';

const encoder = new TextEncoder();

export function toBase64(bytes: Uint8Array): string {
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

export function fromBase64(text: string): Uint8Array {
  const binary = atob(text);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

/** URL-safe base64 without padding (cursors, signatures in links). */
export const toBase64Url = (bytes: Uint8Array): string =>
  toBase64(bytes).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');

export function fromBase64Url(text: string): Uint8Array {
  return fromBase64(text.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (text.length % 4)) % 4));
}

/** A random secret token: `prefix` + base32 of `bytes` random bytes. */
export function randomToken(prefix: string, bytes = 30): string {
  return prefix + encodeBase32(crypto.getRandomValues(new Uint8Array(bytes))).toLowerCase();
}

const aesKeys = new Map<string, Promise<CryptoKey>>();

function aesKey(secret: string): Promise<CryptoKey> {
  let key = aesKeys.get(secret);
  if (!key) {
    const raw = fromBase64(secret);
    if (raw.length !== 32) throw new Error('CREDENTIALS_KEY must be base64 of exactly 32 bytes');
    key = crypto.subtle.importKey('raw', raw, 'AES-GCM', false, ['encrypt', 'decrypt']);
    aesKeys.set(secret, key);
  }
  return key;
}

/** AES-256-GCM: "v1.<base64 iv>.<base64 ciphertext+tag>". `context` is bound as additional data. */
export async function encryptSecret(secret: string, plaintext: string, context: string): Promise<string> {
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const sealed = await crypto.subtle.encrypt(
    { name: 'AES-GCM', iv, additionalData: encoder.encode(context) },
    await aesKey(secret),
    encoder.encode(plaintext),
  );
  return `v1.${toBase64(iv)}.${toBase64(new Uint8Array(sealed))}`;
}

export async function decryptSecret(secret: string, sealed: string, context: string): Promise<string> {
  const [version, iv, data] = sealed.split('.');
  if (version !== 'v1' || !iv || !data) throw new Error('unknown ciphertext format');
  const plain = await crypto.subtle.decrypt(
    { name: 'AES-GCM', iv: fromBase64(iv), additionalData: encoder.encode(context) },
    await aesKey(secret),
    fromBase64(data),
  );
  return new TextDecoder().decode(plain);
}
