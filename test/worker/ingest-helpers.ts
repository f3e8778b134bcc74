/** Helpers of the parser tests: messages written byte by byte, and what every parsed message must look like. */
import { expect } from 'vitest';
import { toBase64 } from '../../worker/lib/crypto.ts';
import type { ParsedAddress, ParsedMessage } from '../../worker/ingest/types.ts';

/** A message from lines; each char is one byte, so '\xe9' is the Latin-1 byte 0xE9. */
export function mail(lines: string[], eol = '\r\n'): Uint8Array {
  const text = lines.join(eol);
  return Uint8Array.from(text, (c) => c.charCodeAt(0));
}

export const utf8Bytes = (text: string) => new TextEncoder().encode(text);
export const b64 = (bytes: Uint8Array) => toBase64(bytes).replace(/.{76}/g, '$&\r\n');

/** What any parsed message must satisfy, whatever went in. */
export function expectSane(m: ParsedMessage): void {
  const isAddress = (a: ParsedAddress) =>
    typeof a.address === 'string' && a.address.length > 0 && typeof a.name === 'string';
  expect(m.message_id === null || /^<[^<>]+>$/.test(m.message_id)).toBe(true);
  expect(m.in_reply_to === null || /^<[^<>]+>$/.test(m.in_reply_to)).toBe(true);
  expect(m.references.every((r) => /^<[^<>]+>$/.test(r))).toBe(true);
  expect(typeof m.subject).toBe('string');
  expect(m.date_ms === null || Number.isFinite(m.date_ms)).toBe(true);
  expect(m.from === null || isAddress(m.from)).toBe(true);
  expect([...m.to, ...m.cc, ...m.bcc, ...m.reply_to].every(isAddress)).toBe(true);
  expect(typeof m.html).toBe('string');
  expect(typeof m.plain).toBe('string');
  expect(m.snippet.length).toBeLessThanOrEqual(200);
  expect(m.snippet).not.toMatch(/\s{2}|^\s|\s$/);
  expect(m.headers.every((h) => typeof h.name === 'string' && h.name.length > 0 && typeof h.value === 'string')).toBe(
    true,
  );
  for (const a of m.attachments) {
    expect(a.filename.length).toBeGreaterThan(0);
    expect(a.extension).toMatch(/^[^.A-Z]*$/);
    expect(a.mime).toMatch(/^[^/\s]+\/[^/\s]+$/);
    expect(a.content).toBeInstanceOf(Uint8Array);
    expect(a.size).toBe(a.content.byteLength);
    expect(a.cid === null || (a.cid.length > 0 && !/^<|>$/.test(a.cid))).toBe(true);
  }
  expect(m.has_attachments).toBe(m.attachments.length > 0);
  expect(m.fingerprint).toMatch(/^[0-9a-f]{64}$/);
}
