// Authentication exactly as specified: four 401 codes with Bearer challenges, immediate revocation,
// 503 when keys cannot be checked; plus /, /health and /v1/auth.
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
