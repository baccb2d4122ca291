// Authentication exactly as specified: four 401 codes with Bearer challenges, immediate revocation,
// 503 when keys cannot be checked; plus /, /health and /v1/auth.
import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { call, closeDb, db, newOrg, stack } from './helpers/stack.ts';
import { createKey, revokeKey } from '../shared/db/orgs.ts';
import { startApiProcess } from './helpers/processes.ts';
import { freePort } from '../shared/infra/free-port.ts';

afterAll(closeDb);

function expect401(res: { status: number; headers: Headers; body: any }, code: string, invalidToken: boolean) {
  expect(res.status).toBe(401);
  expect(res.body.error.code).toBe(code);
  expect(res.body.error.type).toBe('authentication_error');
  const challenge = res.headers.get('www-authenticate') ?? '';
  expect(challenge).toMatch(/^Bearer realm="workflow-query-service"/);
  if (invalidToken) expect(challenge).toContain('error="invalid_token"');
  else expect(challenge).not.toContain('error=');
}

describe('authentication', () => {
  it('missing key', async () => {
    expect401(await call('GET', '/v1/auth'), 'api_key_required', false);
    expect401(await call('POST', '/v1/query', { body: {} }), 'api_key_required', false);
    // The key before the body: whatever a caller without one sends (not JSON, another type, too large), it is 401.
    expect401(await call('POST', '/v1/query', { rawBody: '{bad', headers: { 'content-type': 'application/json' } }), 'api_key_required', false);
    expect401(await call('POST', '/v1/query', { rawBody: '{}', headers: { 'content-type': 'text/plain' } }), 'api_key_required', false);
    expect401(await call('POST', '/v1/query', { rawBody: `{"prompt":"${'x'.repeat(3 * 1024 * 1024)}"}`, headers: { 'content-type': 'application/json' } }), 'api_key_required', false);
    expect401(await call('POST', '/v1/query/requests/req_0000000000/feedback', { rawBody: 'x', headers: { 'content-type': 'text/plain' } }), 'api_key_required', false);
  });

  it('malformed and unknown keys', async () => {
    expect401(await call('GET', '/v1/auth', { headers: { authorization: 'Basic abc' } }), 'invalid_api_key', true);
    expect401(await call('GET', '/v1/auth', { key: 'svc_sk_short' }), 'invalid_api_key', true);
    expect401(await call('GET', '/v1/auth', { key: `svc_sk_${'A'.repeat(40)}` }), 'invalid_api_key', true);
  });

  it('a valid key passes; revocation is effective on the very next request', async () => {
    const org = await newOrg(1);
    const ok = await call('GET', '/v1/auth', { key: org.api_key });
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ success: true, data: {} });
    await revokeKey(db(), org.api_key);
    expect401(await call('GET', '/v1/auth', { key: org.api_key }), 'revoked_api_key', true);
  });

  it('an expired key', async () => {
    const org = await newOrg(1);
    const key = await createKey(db(), org.org_id, new Date(Date.now() - 1000));
    expect401(await call('GET', '/v1/auth', { key: key.api_key }), 'expired_api_key', true);
  });

  it('keys are stored only as hashes', async () => {
    const org = await newOrg(1);
    const r = await db().query('SELECT * FROM api_keys WHERE org_id = $1', [org.org_id]);
    expect(JSON.stringify(r.rows)).not.toContain(org.api_key);
  });
});

/** One request written as is (fetch would fold repeated headers into one): status line, headers and body. */
function rawRequest(text: string): Promise<{ status: number; headers: string; body: any }> {
  const u = new URL(stack().baseUrl);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(u.port), u.hostname, () => socket.write(text));
    let out = '';
    socket.on('data', (d) => (out += d.toString('latin1')));
    socket.on('error', reject);
    socket.on('end', () => {
      const [head = '', body = ''] = out.split('\r\n\r\n');
      let parsed: unknown;
      try {
        parsed = JSON.parse(body);
      } catch {
        parsed = undefined;
      }
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]), headers: head.toLowerCase(), body: parsed });
    });
  });
}

describe('authentication as an attacker meets it', () => {
  it('two Authorization headers are refused, whichever comes first: which one counts must never depend on the reader', async () => {
    const org = await newOrg(1);
    const unknown = `svc_sk_${'C'.repeat(40)}`;
    for (const [first, second] of [
      [org.api_key, unknown],
      [unknown, org.api_key],
      [org.api_key, org.api_key],
    ]) {
      for (const path of ['/v1/auth', '/v1/catalog/tools']) {
        const res = await rawRequest(`GET ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${first}\r\nauthorization: Bearer ${second}\r\nConnection: close\r\n\r\n`);
        expect(res.status, JSON.stringify(res.body)).toBe(401);
        expect(res.body.error.code).toBe('invalid_api_key');
        expect(res.headers).toContain('www-authenticate: bearer realm="workflow-query-service", error="invalid_token"');
      }
    }
    // MCP too (its bearer may also be an OAuth access token).
    const rpc = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    const mcp = await rawRequest(
      `POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${org.api_key}\r\nAuthorization: Bearer ${unknown}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: ${rpc.length}\r\nConnection: close\r\n\r\n${rpc}`,
    );
    expect(mcp.status, JSON.stringify(mcp.body)).toBe(401);
    expect(mcp.body.error.code).toBe('invalid_api_key');
    expect(mcp.headers).toMatch(/www-authenticate: bearer realm="workflow-query-service", error="invalid_token".*resource_metadata=/);
    // The same key once passes.
    const one = await rawRequest(`GET /v1/auth HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${org.api_key}\r\nConnection: close\r\n\r\n`);
    expect(one.status).toBe(200);
  });

  it('headers too large for the server get the 400 envelope; a key in the query string is no credential', async () => {
    const huge = await rawRequest(`GET /v1/auth HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer svc_sk_${'A'.repeat(70_000)}\r\nConnection: close\r\n\r\n`);
    expect(huge.status).toBe(400);
    expect(huge.body.error).toMatchObject({ code: 'invalid_input', message: 'The request headers are too large' });
    const org = await newOrg(1);
    expect401(await call('GET', `/v1/auth?api_key=${org.api_key}&access_token=${org.api_key}`), 'api_key_required', false);
    // Scheme case does not matter (RFC 9110); anything after the key does.
    expect((await call('GET', '/v1/auth', { headers: { authorization: `bEaReR ${org.api_key}` } })).status).toBe(200);
    expect401(await call('GET', '/v1/auth', { headers: { authorization: `Bearer ${org.api_key} extra` } }), 'invalid_api_key', true);
    expect401(await call('GET', '/v1/auth', { headers: { authorization: `Bearer ${org.api_key}, Bearer ${org.api_key}` } }), 'invalid_api_key', true);
  });

  it('a revoked key is refused on every keyed route at once; the organization\'s other keys and other organizations keep working', async () => {
    const org = await newOrg(5);
    const other = await newOrg(5);
    const spare = await createKey(db(), org.org_id);
    await revokeKey(db(), org.api_key);
    const keyed: Array<[string, string, Record<string, unknown>]> = [
      ['GET', '/v1/auth', {}],
      ['POST', '/v1/query', { body: { api: '@weather', operation: 'current_weather', input: { city: 'London' } } }],
      ['GET', '/v1/query/requests/req_AAAAAAAAAAAA', {}],
      ['POST', '/v1/query/requests/req_AAAAAAAAAAAA/feedback', { body: { value: 1 } }],
      ['POST', '/v1/files', { rawBody: 'hello', headers: { 'content-type': 'application/octet-stream', 'x-file-name': 'a.txt' } }],
      ['GET', '/v1/catalog/tools', {}],
      ['POST', '/mcp', { body: { jsonrpc: '2.0', id: 1, method: 'tools/list' }, headers: { accept: 'application/json, text/event-stream' } }],
    ];
    for (const [method, path, opts] of keyed) {
      const res = await call(method, path, { ...opts, key: org.api_key });
      expect(res.status, `${method} ${path}: ${res.text.slice(0, 200)}`).toBe(401);
      expect(res.body.error.code, `${method} ${path}`).toBe('revoked_api_key');
    }
    expect((await call('GET', '/v1/auth', { key: spare.api_key })).status).toBe(200);
    expect((await call('GET', '/v1/auth', { key: other.api_key })).status).toBe(200);
  });

  it('refusals name nothing of the key\'s organization: no organization or key id, no prefix, no key', async () => {
    const org = await newOrg(1);
    const expired = await createKey(db(), org.org_id, new Date(Date.now() - 1000));
    const revoked = await createKey(db(), org.org_id);
    await revokeKey(db(), revoked.api_key);
    for (const [key, code] of [
      [expired.api_key, 'expired_api_key'],
      [revoked.api_key, 'revoked_api_key'],
    ] as const) {
      const res = await call('GET', '/v1/auth', { key });
      expect401(res, code, true);
      const seen = `${res.text} ${[...res.headers.entries()].join(' ')}`;
      for (const secret of [org.org_id, expired.key_id, revoked.key_id, key, key.slice(0, 12)]) expect(seen).not.toContain(secret);
    }
  });
});

describe('discovery and health', () => {
  it('GET / describes the service', async () => {
    const res = await call('GET', '/');
    expect(res.status).toBe(200);
    expect(res.body.success).toBe(true);
    expect(res.body.data).toMatchObject({ service: expect.any(String), version: expect.any(String), product: expect.any(String), status: 'ok', build_available: false, endpoint: '/v1/query' });
    expect(res.body.data.registered_providers).toBeGreaterThanOrEqual(2);
  });

  it('GET /health checks PostgreSQL and Temporal', async () => {
    const res = await call('GET', '/health');
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(['checks', 'service', 'status', 'timestamp', 'uptime_seconds']);
    expect(res.body.status).toBe('ok');
    expect(res.body.checks.postgres.status).toBe('ok');
    expect(res.body.checks.temporal.status).toBe('ok');
  });

  it('when PostgreSQL and Temporal are unreachable: health is 503 degraded and keys answer 503 with Retry-After', async () => {
    const deadPg = await freePort();
    const deadTemporal = await freePort();
    const api = await startApiProcess({
      databaseUrl: `postgres://postgres:postgres@127.0.0.1:${deadPg}/wqs`,
      temporalAddress: `127.0.0.1:${deadTemporal}`,
      hostMap: {},
      taskQueue: 'unused',
      env: { WQS_SKIP_MIGRATIONS: '1' },
    });
    try {
      const base = String(api.started.url);
      const health = await call('GET', '/health', { baseUrl: base });
      expect(health.status).toBe(503);
      expect(health.body.status).toBe('degraded');
      expect(health.body.checks.postgres.status).toBe('down');
      const auth = await call('GET', '/v1/auth', { baseUrl: base, key: `svc_sk_${'B'.repeat(40)}` });
      expect(auth.status).toBe(503);
      expect(auth.body.error.code).toBe('api_key_verification_unavailable');
      expect(auth.body.error.retryable).toBe(true);
      expect(Number(auth.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(auth.text).not.toMatch(/ECONNREFUSED|at .*\.ts:\d+/);
    } finally {
      await api.kill();
    }
  });
});

describe('stack sanity', () => {
  it('has a base URL', () => {
    expect(stack().baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });
});
