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

describe('key-free routes take no path and tell nothing of any organization', () => {
  it('icons and the reference assets refuse traversal and prototype names', async () => {
    for (const p of ['/v1/icons/..%2f..%2fetc%2fpasswd', `/v1/icons/${'A'.repeat(64)}`]) {
      const res = await call('GET', p);
      expect(res.status, p).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_input', param: 'sha256' });
    }
    for (const p of ['/docs/assets/..%2fpackage.json', '/docs/assets/..%2f..%2f..%2fpackage.json', '/docs/assets/__proto__', '/docs/assets/constructor']) {
      const res = await call('GET', p);
      expect(res.status, p).toBe(404);
      expect(res.body.error.code, p).toBe('route_not_found');
      expect(res.text).not.toContain('"name"'); // no package.json
    }
  });

  it('probes, discovery, the OpenAPI document and the API catalog carry no organization, key or secret', async () => {
    const org = await newOrg(3);
    // Something of the organization's exists: a request and a file.
    await call('GET', '/v1/auth', { key: org.api_key });
    const file = await call('POST', '/v1/files', { key: org.api_key, rawBody: 'hello', headers: { 'content-type': 'application/octet-stream', 'x-file-name': 'probe.txt' } });
    expect(file.status).toBe(201);
    const texts: string[] = [];
    for (const p of ['/', '/health', '/livez', '/readyz', '/openapi.json', '/.well-known/api-catalog', '/docs', '/docs/assets/init.js']) {
      const res = await call('GET', p);
      expect(res.status, p).toBe(200);
      texts.push(res.text, [...res.headers.entries()].join(' '));
    }
    const all = texts.join('\n');
    for (const secret of [org.org_id, org.key_id, org.api_key, org.api_key.slice(0, 12), org.name, 'probe.txt', 'postgres://', 'DATABASE_URL', 'CODEC_ENDPOINT_TOKEN=', file.body.data.id]) {
      expect(all.includes(secret), secret).toBe(false);
    }
  });
});

