import { describe, expect, it } from 'vitest';
import { newId } from '../../worker/lib/ids.ts';
import { api, expectError } from './helpers.ts';

describe('errors in the spec shape', () => {
  it('answers an unknown path with 404 not_found', async () => {
    expectError(await api('GET', '/no-such-thing'), 404, 'not_found');
    expectError(await api('GET', '/../../etc'), 404, 'not_found');
  });

  it('answers a path outside /api/v1 with 404 too', async () => {
    const { exports } = await import('cloudflare:workers');
    const res = await exports.default.fetch('https://mail.example.com/');
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ status: 404, type: 'errors/not_found' });
  });

  it('treats malformed and wrong-type ids as not found', async () => {
    expectError(await api('GET', '/accounts/nope'), 404, 'not_found');
    expectError(await api('GET', `/accounts/${newId('endpoint')}`), 404, 'not_found');
    expectError(await api('GET', `/accounts/${newId('account')}`), 404, 'not_found');
    expectError(await api('DELETE', '/api-keys/acc_01HZZZZZZZZZZZZZZZZZZZZZZZ'), 404, 'not_found');
  });

  it('refuses a malformed JSON body with 400', async () => {
    const error = expectError(
      await api('POST', '/api-keys', { rawBody: '{"name": "x",', headers: { 'Content-Type': 'application/json' } }),
      400,
      'invalid_parameters',
    );
    expect(error.detail).toMatch(/malformed JSON/);
    expectError(await api('POST', '/api-keys', { body: ['not', 'an', 'object'] }), 400, 'invalid_parameters');
  });

  it('refuses a body over 30 MB with 413', async () => {
    const big = new Uint8Array(30 * 1024 * 1024 + 1).fill(0x61);
    const res = await api('POST', '/api-keys', { rawBody: big, headers: { 'Content-Type': 'application/json' } });
    expectError(res, 413, 'payload_too_large');
  });

  it('checks the API key before anything else', async () => {
    expectError(await api('GET', '/accounts/nope', { key: null }), 401, 'unauthorized');
  });
});
