/** Worker-side WebCrypto helpers: base64, random tokens, AES-GCM for secrets at rest (hashing and HMAC: common/crypto.ts). */

import { encodeBase32 } from './ids.ts';
import { toHex } from '../../common/crypto.ts';

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

/**
 * The key that seals secrets at rest (CREDENTIALS_KEY), and during a rotation the one before it
 * (CREDENTIALS_KEY_PREVIOUS), which still opens what it sealed until that is sealed again.
 */
export interface SecretKeys {
  current: string;
  previous?: string;
}

export const secretKeys = (env: { CREDENTIALS_KEY: string; CREDENTIALS_KEY_PREVIOUS?: string }): SecretKeys => ({
  current: env.CREDENTIALS_KEY,
  ...(env.CREDENTIALS_KEY_PREVIOUS?.trim() ? { previous: env.CREDENTIALS_KEY_PREVIOUS.trim() } : {}),
});

const keyIds = new Map<string, Promise<string>>();

/** A short public name of a key (a prefix of its SHA-256), written into what it seals. */
export function keyId(secret: string): Promise<string> {
  let id = keyIds.get(secret);
  if (!id) {
    id = crypto.subtle.digest('SHA-256', fromBase64(secret)).then((d) => toHex(new Uint8Array(d)).slice(0, 8));
    keyIds.set(secret, id);
  }
  return id;
}

/**
 * AES-256-GCM: "v2.<key id>.<base64 iv>.<base64 ciphertext+tag>" with the current key. `context` is
 * bound as additional data. (The older "v1.<iv>.<data>" names no key; it is still opened.)
 */
export async function encryptSecret(keys: SecretKeys, plaintext: string, context: string): Promise<string> {
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const sealed = await crypto.subtle.encrypt(
    { name: 'AES-GCM', iv, additionalData: encoder.encode(context) },
    await aesKey(keys.current),
    encoder.encode(plaintext),
  );
  return `v2.${await keyId(keys.current)}.${toBase64(iv)}.${toBase64(new Uint8Array(sealed))}`;
}

/** The keys that may have sealed `sealed`, the likeliest first. */
async function candidateKeys(keys: SecretKeys, sealed: string): Promise<{ keys: string[]; iv: string; data: string }> {
  const parts = sealed.split('.');
  const all = keys.previous ? [keys.current, keys.previous] : [keys.current];
  if (parts[0] === 'v1' && parts.length === 3) return { keys: all, iv: parts[1]!, data: parts[2]! };
  if (parts[0] === 'v2' && parts.length === 4) {
    const named = [];
    for (const key of all) if ((await keyId(key)) === parts[1]) named.push(key);
    if (named.length === 0)
      throw new Error('sealed with a key that is neither CREDENTIALS_KEY nor CREDENTIALS_KEY_PREVIOUS');
    return { keys: named, iv: parts[2]!, data: parts[3]! };
  }
  throw new Error('unknown ciphertext format');
}

/** The plaintext, and whether it should be sealed again with the current key (`stale`). */
export async function openSecret(
  keys: SecretKeys,
  sealed: string,
  context: string,
): Promise<{ plaintext: string; stale: boolean }> {
  const { keys: candidates, iv, data } = await candidateKeys(keys, sealed);
  let failure: unknown;
  for (const key of candidates) {
    try {
      const plain = await crypto.subtle.decrypt(
        { name: 'AES-GCM', iv: fromBase64(iv), additionalData: encoder.encode(context) },
        await aesKey(key),
        fromBase64(data),
      );
      return { plaintext: new TextDecoder().decode(plain), stale: key !== keys.current || sealed.startsWith('v1.') };
    } catch (err) {
      failure = err;
    }
  }
  throw failure;
}

export async function decryptSecret(keys: SecretKeys, sealed: string, context: string): Promise<string> {
  return (await openSecret(keys, sealed, context)).plaintext;
}

/** The LIKE pattern of what `key` sealed (a sweep for stale secrets looks for the previous key's). */
export async function sealedWithPattern(key: string): Promise<string> {
  return `v2.${await keyId(key)}.%`;
}
