// The key-free operational surfaces on the real stack, as an attacker without credentials meets
// them: the operators' payload codec (the stack's API has CODEC_ENDPOINT_TOKEN set) refuses before
// it reads a body; icons and the reference's assets take no path; probes say nothing about any
// organization.
import { afterAll, describe, expect, it } from 'vitest';
import { call, closeDb, newOrg } from './helpers/stack.ts';

afterAll(closeDb);

function expect401(res: { status: number; headers: Headers; body: any }, code: string) {
  expect(res.status, JSON.stringify(res.body)).toBe(401);
  expect(res.body).toMatchObject({ success: false, error: { type: 'authentication_error', code, status: 401 } });
  expect(res.headers.get('www-authenticate')).toMatch(/^Bearer realm="temporal-codec"/);
}

describe('codec endpoint: the token before the body', () => {
  const json = { 'content-type': 'application/json' };

  it('without the token, a body that is not JSON, too large or of another type is 401, never parsed', async () => {
    for (const path of ['/codec/decode', '/codec/encode']) {
      expect401(await call('POST', path, { rawBody: '{not json', headers: json }), 'api_key_required');
      // 3 MB: past the 2 MB body limit, so a parsed body would be 413.
      expect401(await call('POST', path, { rawBody: `{"payloads":[{"data":"${'A'.repeat(3 * 1024 * 1024)}"}]}`, headers: json }), 'api_key_required');
      expect401(await call('POST', path, { rawBody: 'payloads', headers: { 'content-type': 'text/plain' } }), 'api_key_required');
      // Nested past the JSON depth limit: 400 once parsed.
      expect401(await call('POST', path, { rawBody: '['.repeat(100) + ']'.repeat(100), headers: json }), 'api_key_required');
    }
  });

  it('a wrong token, or an organization API key, is 401 invalid_api_key before the body too', async () => {
    const org = await newOrg(1);
    for (const key of [org.api_key, 'x'.repeat(64)]) {
      expect401(await call('POST', '/codec/decode', { key, rawBody: '{not json', headers: json }), 'invalid_api_key');
      expect401(await call('POST', '/codec/encode', { key, rawBody: `{"payloads":[{"data":"${'A'.repeat(3 * 1024 * 1024)}"}]}`, headers: json }), 'invalid_api_key');
    }
  });
});
