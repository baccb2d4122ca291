// MCP sign-in with OAuth: what is refused, over real HTTP against the running API. Each case drives
// registration and the consent page like a client and a browser would, then checks the token
// endpoint's RFC 6749 answers and what /mcp accepts afterwards.
import { createHash, randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { changeMember } from '../shared/accounts/users.ts';
import { hashSecret } from '../shared/oauth/secrets.ts';
import { call, closeDb, db, ownPair, stack } from './helpers/stack.ts';
import { startApiProcess } from './helpers/processes.ts';
import { orgWithUser, signedIn } from './helpers/console-http.ts';

afterAll(closeDb);

const REDIRECT = 'http://127.0.0.1:40123/cb';
const base = () => stack().baseUrl;
const resource = () => `${base()}/mcp`;
const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } };

async function form(path: string, fields: Record<string, string>) {
  const res = await fetch(`${base()}${path}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(fields) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, body: text ? JSON.parse(text) : undefined };
}

const mcp = (token: string, headers: Record<string, string> = {}) =>
  call('POST', '/mcp', { body: INIT, headers: { accept: 'application/json, text/event-stream', authorization: `Bearer ${token}`, ...headers } });

async function register(redirects = [REDIRECT]) {
  const res = await call('POST', '/oauth/register', { body: { client_name: 'Refusal client', redirect_uris: redirects } });
  expect(res.status).toBe(201);
  return res.body.client_id as string;
}

function pkce() {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

const authorizePath = (p: Record<string, string>) => `/console/oauth/authorize?${new URLSearchParams(p)}`;

/** A signed-in person approving `clientId` for their organization: the code and what it was bound to. */
async function codeFor(who: Awaited<ReturnType<typeof signedIn>>, clientId: string, redirect = REDIRECT) {
  const { verifier, challenge } = pkce();
  const params = { response_type: 'code', client_id: clientId, redirect_uri: redirect, code_challenge: challenge, code_challenge_method: 'S256', state: 's1', resource: resource() };
  const path = authorizePath(params);
  const answer = await who.client.submit(path, '/console/oauth/authorize', { ...params, org_id: who.org.org_id, decision: 'approve' });
  expect(answer.status).toBe(303);
  const code = new URL(answer.location!).searchParams.get('code')!;
  expect(code).toBeTruthy();
  return { code, verifier, redirect };
}

async function tokensFor(who: Awaited<ReturnType<typeof signedIn>>, clientId: string) {
  const c = await codeFor(who, clientId);
  const res = await form('/oauth/token', { grant_type: 'authorization_code', code: c.code, code_verifier: c.verifier, redirect_uri: c.redirect, client_id: clientId, resource: resource() });
  expect(res.status).toBe(200);
  return res.body as { access_token: string; refresh_token: string };
}

describe('discovery', () => {
  it('names this service as authorization server; the challenge carries resource_metadata and scope', async () => {
    const prm = await call('GET', '/.well-known/oauth-protected-resource/mcp');
    expect(prm.body).toMatchObject({ resource: resource(), authorization_servers: [base()], scopes_supported: ['mcp'] });
    const as = await call('GET', '/.well-known/oauth-authorization-server');
    expect(as.body).toMatchObject({
      issuer: base(),
      authorization_endpoint: `${base()}/console/oauth/authorize`,
      token_endpoint: `${base()}/oauth/token`,
      registration_endpoint: `${base()}/oauth/register`,
      revocation_endpoint: `${base()}/oauth/revoke`,
      code_challenge_methods_supported: ['S256'],
      client_id_metadata_document_supported: true,
      authorization_response_iss_parameter_supported: true,
      token_endpoint_auth_methods_supported: ['none'],
    });
    const res = await call('POST', '/mcp', { body: INIT });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toContain(`resource_metadata="${base()}/.well-known/oauth-protected-resource/mcp"`);
    expect(res.headers.get('www-authenticate')).toContain('scope="mcp"');
  });
});

describe('registration', () => {
  it('accepts a missing scope and refuses unsafe or oversized redirect URIs and confidential clients', async () => {
    const ok = await call('POST', '/oauth/register', { body: { redirect_uris: ['https://app.example/cb', 'http://localhost/cb'] } });
    expect(ok.status).toBe(201);
    expect(ok.body).toMatchObject({ scope: 'mcp', token_endpoint_auth_method: 'none', client_name: 'Unnamed MCP client' });
    expect(ok.body.client_secret).toBeUndefined();
    for (const [body, error] of [
      [{ redirect_uris: ['http://app.example/cb'] }, 'invalid_redirect_uri'],
      [{ redirect_uris: ['https://app.example/cb#frag'] }, 'invalid_redirect_uri'],
      [{ redirect_uris: ['javascript:alert(1)'] }, 'invalid_redirect_uri'],
      [{ redirect_uris: Array.from({ length: 11 }, (_, i) => `https://app.example/${i}`) }, 'invalid_redirect_uri'],
      [{ redirect_uris: [`https://app.example/${'a'.repeat(2100)}`] }, 'invalid_redirect_uri'],
      [{ redirect_uris: [] }, 'invalid_redirect_uri'],
      [{ redirect_uris: ['https://app.example/cb'], token_endpoint_auth_method: 'client_secret_basic' }, 'invalid_client_metadata'],
      [{ redirect_uris: ['https://app.example/cb'], scope: 'admin' }, 'invalid_client_metadata'],
      [{ redirect_uris: ['https://app.example/cb'], client_name: 'x'.repeat(300) }, 'invalid_client_metadata'],
      // A name the consent page shows: a direction override would reorder the page's own words after it.
      [{ redirect_uris: ['https://app.example/cb'], client_name: 'Claude\u202E gnirts' }, 'invalid_client_metadata'],
      [{ redirect_uris: ['https://app.example/cb'], client_name: 'Cla\u200Bude' }, 'invalid_client_metadata'],
    ] as const) {
      const res = await call('POST', '/oauth/register', { body });
      expect(res.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(res.body.error).toBe(error);
    }
  });
});

describe('per-address limits', () => {
  it('registrations and token requests past their per-minute limit are 429 slow_down with Retry-After, per client address', async () => {
    const own = await startApiProcess(
      ownPair('oauth-rate', { WQS_SKIP_MIGRATIONS: '1', TRUST_PROXY: '127.0.0.1', OAUTH_REGISTRATIONS_PER_MINUTE: '2', OAUTH_TOKEN_REQUESTS_PER_MINUTE: '3' }),
    );
    const ownBase = String(own.started.url).replace(/\/$/, '');
    const from = (address: string) => ({ 'x-forwarded-for': address });
    const reg = async (address: string) => {
      const res = await fetch(`${ownBase}/oauth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...from(address) },
        body: JSON.stringify({ client_name: 'Rate limited', redirect_uris: [REDIRECT] }),
      });
      return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
    };
    const token = async (address: string) => {
      const res = await fetch(`${ownBase}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...from(address) },
        body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: 'wqs_rt_unknown', client_id: 'mcpc_unknown' }).toString(),
      });
      return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
    };
    try {
      expect([(await reg('203.0.113.7')).status, (await reg('203.0.113.7')).status]).toEqual([201, 201]);
      const third = await reg('203.0.113.7');
      expect(third.status).toBe(429);
      expect(third.body).toEqual({ error: 'slow_down', error_description: 'Too many requests from this address; retry later' });
      expect(third.headers.get('retry-after')).toBe('60');
      expect(third.headers.get('cache-control')).toBe('no-store');
      // Another address is counted apart; the same /64 of IPv6 is one address.
      expect((await reg('203.0.113.8')).status).toBe(201);
      expect([(await reg('2001:db8:1:2::1')).status, (await reg('2001:db8:1:2::ffff')).status, (await reg('2001:db8:1:2:ab::9')).status]).toEqual([201, 201, 429]);

      for (let i = 0; i < 3; i++) expect((await token('198.51.100.4')).status).toBe(401); // an unknown client
      const over = await token('198.51.100.4');
      expect(over.status).toBe(429);
      expect(over.body.error).toBe('slow_down');
      expect((await token('198.51.100.5')).status).toBe(401);
    } finally {
      await own.kill('SIGKILL');
    }
  });
});

describe('registration bound', () => {
  it('refuses registration (503 temporarily_unavailable, Retry-After) while too many registered clients were never used; a client used, or aged past the bound, frees room', async () => {
    // The bound counts every organization's clients in the database: this API's is set just above
    // what is there now (files run one at a time, so nobody else registers meanwhile).
    const unused = async () =>
      (await db().query(`SELECT count(*)::int AS n FROM oauth_clients WHERE kind = 'dcr' AND last_used_at IS NULL AND created_at > now() - interval '24 hours'`)).rows[0].n as number;
    const own = await startApiProcess(ownPair('oauth-cap', { WQS_SKIP_MIGRATIONS: '1', OAUTH_UNUSED_CLIENTS_MAX: String((await unused()) + 2) }));
    const ownBase = String(own.started.url).replace(/\/$/, '');
    const reg = async () => {
      const res = await fetch(`${ownBase}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ client_name: 'Bounded', redirect_uris: [REDIRECT] }) });
      return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
    };
    try {
      const first = await reg();
      const second = await reg();
      expect([first.status, second.status]).toEqual([201, 201]);
      const full = await reg();
      expect(full.status).toBe(503);
      expect(full.body).toEqual({ error: 'temporarily_unavailable', error_description: expect.stringContaining('Too many registered clients have not been used yet') });
      expect(full.headers.get('cache-control')).toBe('no-store');
      const retry = Number(full.headers.get('retry-after'));
      expect(retry).toBeGreaterThan(0);
      expect(retry).toBeLessThanOrEqual(24 * 3600);
      // A client someone signed in with is used: no longer counted, so one more may register.
      await tokensFor(await signedIn('member'), first.body.client_id as string);
      expect((await reg()).status).toBe(201);
      expect((await reg()).status).toBe(503);
      // One registered longer ago than OAUTH_CLIENT_IDLE_HOURS is out of the count too (maintenance removes it).
      await db().query(`UPDATE oauth_clients SET created_at = now() - interval '25 hours' WHERE id = $1`, [second.body.client_id]);
      expect((await reg()).status).toBe(201);
      expect((await reg()).status).toBe(503);
    } finally {
      await own.kill();
    }
  });
});

describe('the consent page', () => {
  it("escapes a registered client's name and the request's fields, names where answers go, and cannot be framed", async () => {
    const who = await signedIn('member');
    const evil = '<script>alert(1)</script>"><img src=x onerror=alert(2)>';
    const res = await call('POST', '/oauth/register', { body: { client_name: `Claude ${evil}`, redirect_uris: ['https://attacker.example/cb'] } });
    expect(res.status).toBe(201);
    const { challenge } = pkce();
    const state = '"><script>alert(3)</script>';
    const page = await who.client.get(authorizePath({ response_type: 'code', client_id: res.body.client_id, redirect_uri: 'https://attacker.example/cb', code_challenge: challenge, code_challenge_method: 'S256', state, resource: resource() }));
    expect(page.status).toBe(200);
    expect(page.text).not.toContain('<script>alert');
    expect(page.text).not.toContain('<img src=x');
    expect(page.text).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(page.text).toContain('its name is not verified');
    expect(page.text).toContain('Answers go to <strong>attacker.example</strong>');
    expect(page.headers.get('x-frame-options')).toBe('DENY');
    expect(page.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(page.headers.get('content-security-policy')).toContain("form-action 'self' https://attacker.example;");
    expect(page.headers.get('cache-control')).toBe('no-store');
  });

  it('a request without a session is sent to sign-in and then back to the same request, never answered with a code', async () => {
    const clientId = await register();
    const { challenge } = pkce();
    const params = { response_type: 'code', client_id: clientId, redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: 'S256', state: 's', resource: resource() };
    const page = await fetch(`${base()}${authorizePath(params)}`, { redirect: 'manual' });
    expect(page.status).toBe(303);
    const to = new URL(page.headers.get('location')!, base());
    expect(to.pathname).toBe('/console/sign-in');
    const next = new URL(to.searchParams.get('next')!, base());
    expect(next.origin + next.pathname).toBe(`${base()}/console/oauth/authorize`);
    expect(Object.fromEntries(next.searchParams)).toEqual(params);
    // A forged form post without a session or CSRF token gets no code.
    const post = await fetch(`${base()}/console/oauth/authorize`, { method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ ...params, org_id: 'org_x', decision: 'approve' }) });
    expect(post.status).toBe(403);
    expect(post.headers.get('location')).toBeNull();
  });
});

describe('hostile bytes', () => {
  it('a NUL in a parameter is the caller\'s invalid_request, never a 503 (PostgreSQL text cannot hold one)', async () => {
    for (const [path, fields] of [
      ['/oauth/token', { grant_type: 'refresh_token', refresh_token: 'wqs_rt_x', client_id: 'mcpc_\u0000' }],
      ['/oauth/revoke', { token: 'wqs_rt_x', client_id: 'mcpc_\u0000' }],
    ] as const) {
      const res = await form(path, fields);
      expect(res.status, `${path}: ${res.text}`).toBe(400);
      expect(res.body.error).toBe('invalid_request');
    }
    const reg = await call('POST', '/oauth/register', { body: { client_name: 'nul\u0000name', redirect_uris: [REDIRECT] } });
    expect(reg.status, JSON.stringify(reg.body)).toBe(400);
  });
});

describe('authorization and code exchange', () => {
  it('refuses a wrong verifier, and the code is spent by that attempt (reuse is refused too)', async () => {
    const who = await signedIn('member');
    const clientId = await register();
    const c = await codeFor(who, clientId);
    const exchange = (verifier: string) =>
      form('/oauth/token', { grant_type: 'authorization_code', code: c.code, code_verifier: verifier, redirect_uri: c.redirect, client_id: clientId, resource: resource() });
    const wrong = await exchange(pkce().verifier);
    expect(wrong.status).toBe(400);
    expect(wrong.body.error).toBe('invalid_grant');
    expect((await exchange(c.verifier)).body.error).toBe('invalid_grant');
    // A code used correctly once is refused the second time.
    const d = await codeFor(who, clientId);
    const ok = await form('/oauth/token', { grant_type: 'authorization_code', code: d.code, code_verifier: d.verifier, redirect_uri: d.redirect, client_id: clientId, resource: resource() });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('cache-control')).toBe('no-store');
    const again = await form('/oauth/token', { grant_type: 'authorization_code', code: d.code, code_verifier: d.verifier, redirect_uri: d.redirect, client_id: clientId, resource: resource() });
    expect(again.body.error).toBe('invalid_grant');
    // Two exchanges of one code at once: exactly one gets tokens.
    const e = await codeFor(who, clientId);
    const both = await Promise.all([0, 1].map(() =>
      form('/oauth/token', { grant_type: 'authorization_code', code: e.code, code_verifier: e.verifier, redirect_uri: e.redirect, client_id: clientId, resource: resource() })));
    expect(both.map((r) => r.status).sort()).toEqual([200, 400]);
    // Stored hashed; once used it is kept, marked used, to recognize a replay.
    expect((await db().query('SELECT used_at IS NOT NULL AS used FROM oauth_codes WHERE code_hash = $1', [hashSecret(d.code)])).rows).toEqual([{ used: true }]);
  });

  it("a code is bound to its client: another client presenting it (with the right verifier) gets nothing, and the code is spent", async () => {
    const who = await signedIn('member');
    const clientId = await register();
    const c = await codeFor(who, clientId);
    const exchange = (client: string) => form('/oauth/token', { grant_type: 'authorization_code', code: c.code, code_verifier: c.verifier, redirect_uri: c.redirect, client_id: client, resource: resource() });
    const stolen = await exchange(await register());
    expect(stolen.status).toBe(400);
    expect(stolen.body).toEqual({ error: 'invalid_grant', error_description: 'The authorization code was issued to another client' });
    expect((await exchange(clientId)).body.error).toBe('invalid_grant');
    expect((await db().query('SELECT 1 FROM oauth_grants WHERE client_id = $1', [clientId])).rowCount).toBe(0);
  });

  it('a code presented again after it was redeemed ends the grant it created: its tokens stop (RFC 6749 §4.1.2)', async () => {
    const who = await signedIn('member');
    const clientId = await register();
    const c = await codeFor(who, clientId);
    const exchange = () => form('/oauth/token', { grant_type: 'authorization_code', code: c.code, code_verifier: c.verifier, redirect_uri: c.redirect, client_id: clientId, resource: resource() });
    const first = await exchange();
    expect(first.status).toBe(200);
    expect((await mcp(first.body.access_token)).status).toBe(200);
    // Whoever replays the code (it leaked through a log, a referrer, a history) gets nothing...
    const replay = await exchange();
    expect(replay.status).toBe(400);
    expect(replay.body).toEqual({ error: 'invalid_grant', error_description: 'The authorization code is unknown, used or expired' });
    // ...and the tokens issued from it stop: the access token at once, the refresh token too.
    const res = await mcp(first.body.access_token);
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('invalid_access_token');
    expect(res.headers.get('www-authenticate')).toContain('error="invalid_token"');
    expect(res.headers.get('www-authenticate')).toContain(`resource_metadata="${base()}/.well-known/oauth-protected-resource/mcp"`);
    const refreshed = await form('/oauth/token', { grant_type: 'refresh_token', refresh_token: first.body.refresh_token, client_id: clientId, resource: resource() });
    expect(refreshed.body.error).toBe('invalid_grant');
    expect((await db().query('SELECT 1 FROM oauth_grants WHERE client_id = $1', [clientId])).rowCount).toBe(0);
    // Two exchanges at once: one wins the race, the other's replay ends what it won.
    const e = await codeFor(who, clientId);
    const both = await Promise.all([0, 1].map(() =>
      form('/oauth/token', { grant_type: 'authorization_code', code: e.code, code_verifier: e.verifier, redirect_uri: e.redirect, client_id: clientId, resource: resource() })));
    const won = both.find((r) => r.status === 200)!;
    expect((await mcp(won.body.access_token)).status).toBe(401);
  });

  it('a redirect URI not registered is shown, never redirected to; loopback may change port; the exchange must repeat it', async () => {
    const who = await signedIn('member');
    const clientId = await register();
    const { challenge } = pkce();
    const params = { response_type: 'code', client_id: clientId, code_challenge: challenge, code_challenge_method: 'S256', resource: resource() };
    // A loopback URI may change its port only: not gain a fragment or credentials (no fragment ever).
    for (const redirect of ['https://evil.example/cb', 'http://127.0.0.1:40123/other', 'http://10.0.0.1:40123/cb', 'http://127.0.0.1:5999/cb#x', 'http://127.0.0.1:40123/cb#', 'http://evil.example@127.0.0.1:5999/cb']) {
      const page = await who.client.get(authorizePath({ ...params, redirect_uri: redirect }));
      expect(page.status).toBe(400);
      expect(page.location).toBeNull();
      expect(page.text).toContain('not one this client registered');
    }
    const otherPort = await codeFor(who, clientId, 'http://127.0.0.1:5999/cb');
    const mismatch = await form('/oauth/token', { grant_type: 'authorization_code', code: otherPort.code, code_verifier: otherPort.verifier, redirect_uri: REDIRECT, client_id: clientId, resource: resource() });
    expect(mismatch.body.error).toBe('invalid_grant');
  });

  it('requires PKCE S256 and the MCP resource; Deny answers access_denied; every answer carries iss', async () => {
    const who = await signedIn('member');
    const clientId = await register();
    const { challenge } = pkce();
    const good = { response_type: 'code', client_id: clientId, redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: 'S256', state: 'st', resource: resource() };
    const cases: Array<[Record<string, string>, string]> = [
      [{ ...good, code_challenge_method: 'plain' }, 'invalid_request'],
      [{ ...good, code_challenge: '' }, 'invalid_request'],
      [{ ...good, resource: 'https://other.example/mcp' }, 'invalid_target'],
      [{ ...good, resource: base() }, 'invalid_target'],
      [{ ...good, scope: 'mcp admin' }, 'invalid_scope'],
      [{ ...good, response_type: 'token' }, 'unsupported_response_type'],
    ];
    for (const [params, error] of cases) {
      const page = await who.client.get(authorizePath(params));
      expect(page.status).toBe(303);
      const to = new URL(page.location!);
      expect(to.origin + to.pathname).toBe(REDIRECT);
      expect(to.searchParams.get('error')).toBe(error);
      expect(to.searchParams.get('state')).toBe('st');
      expect(to.searchParams.get('iss')).toBe(base());
    }
    const denied = await who.client.submit(authorizePath(good), '/console/oauth/authorize', { ...good, org_id: who.org.org_id, decision: 'deny' });
    const to = new URL(denied.location!);
    expect(to.searchParams.get('error')).toBe('access_denied');
    expect(to.searchParams.get('code')).toBeNull();
    // The consent form needs its CSRF token; an organization the person is not in is refused.
    const noToken = await who.client.request('POST', '/console/oauth/authorize', { form: { ...good, org_id: who.org.org_id, decision: 'approve' } });
    expect(noToken.status).toBe(403);
    const other = await orgWithUser('owner');
    const foreign = await who.client.submit(authorizePath(good), '/console/oauth/authorize', { ...good, org_id: other.org.org_id, decision: 'approve' });
    expect(foreign.status).toBe(403);
    expect(foreign.location).toBeNull();
  });

  it('is no open redirector: a refusal for an https redirect URI (registrable by anyone) is shown on the page, never sent there unasked; Deny still answers there', async () => {
    // Anyone can register https://evil.example/... without signing in: a link to the service's own
    // authorization page with a bad parameter must not bounce a visitor there.
    const evil = 'https://evil.example/phish';
    const clientId = await register([evil]);
    const { challenge } = pkce();
    const good = { response_type: 'code', client_id: clientId, redirect_uri: evil, code_challenge: challenge, code_challenge_method: 'S256', state: 'st', resource: resource() };
    const cases: Array<[Record<string, string>, string]> = [
      [{ ...good, response_type: 'token' }, 'unsupported_response_type'],
      [{ ...good, code_challenge_method: 'plain' }, 'invalid_request'],
      [{ ...good, resource: 'https://other.example/mcp' }, 'invalid_target'],
      [{ ...good, scope: 'admin' }, 'invalid_scope'],
    ];
    const who = await signedIn('member');
    for (const [params, error] of cases) {
      for (const res of [await fetch(`${base()}${authorizePath(params)}`, { redirect: 'manual' }), await who.client.get(authorizePath(params))]) {
        expect(res.status, error).toBe(400);
        const location = res instanceof Response ? res.headers.get('location') : res.location;
        expect(location).toBeNull();
        const text = res instanceof Response ? await res.text() : res.text;
        expect(text).toContain(`cannot be answered (${error})`);
      }
    }
    // The person's own decision still goes back to the client.
    const denied = await who.client.submit(authorizePath(good), '/console/oauth/authorize', { ...good, org_id: who.org.org_id, decision: 'deny' });
    expect(denied.status).toBe(303);
    expect(new URL(denied.location!).origin).toBe('https://evil.example');
    expect(new URL(denied.location!).searchParams.get('error')).toBe('access_denied');
  });

  it('a token request for another resource is invalid_target; a token bound to another resource is refused by /mcp', async () => {
    const who = await signedIn('member');
    const clientId = await register();
    const c = await codeFor(who, clientId);
    const other = await form('/oauth/token', { grant_type: 'authorization_code', code: c.code, code_verifier: c.verifier, redirect_uri: c.redirect, client_id: clientId, resource: 'https://other.example/mcp' });
    expect(other.status).toBe(400);
    expect(other.body.error).toBe('invalid_target');
    const t = await tokensFor(who, clientId);
    expect((await mcp(t.access_token)).status).toBe(200);
    await db().query(`UPDATE oauth_grants SET resource = 'https://other.example/mcp' WHERE id = (SELECT grant_id FROM oauth_tokens WHERE token_hash = $1)`, [hashSecret(t.access_token)]);
    const res = await mcp(t.access_token);
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('invalid_access_token');
    expect(res.headers.get('www-authenticate')).toContain('error="invalid_token"');
  });

  it('an unknown client_id, or a metadata document on a private address, is shown, not redirected', async () => {
    const who = await signedIn('member');
    const { challenge } = pkce();
    const params = { response_type: 'code', redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: 'S256', resource: resource() };
    const unknown = await who.client.get(authorizePath({ ...params, client_id: 'mcpc_00000000000000000000000000000000' }));
    expect(unknown.status).toBe(400);
    expect(unknown.text).toContain('not registered');
    // IPv6 spellings of loopback and of the metadata address are private addresses too.
    for (const id of ['https://127.0.0.1/client.json', 'https://localhost/client.json', 'https://169.254.169.254/latest/meta-data', 'https://[::7f00:1]/client.json', 'https://[64:ff9b::a9fe:a9fe]/latest/meta-data']) {
      const page = await who.client.get(authorizePath({ ...params, client_id: id }));
      expect(page.status).toBe(400);
      expect(page.location).toBeNull();
      expect(page.text).toContain('cannot be used');
      expect(page.text, id).toMatch(/private, loopback or link-local|loopback name/);
    }
    // A fetch that fails is told in the service's words: no error code, address or port of the network.
    const nowhere = await who.client.get(authorizePath({ ...params, client_id: 'https://no-such-host.invalid/client.json' }));
    expect(nowhere.status).toBe(400);
    expect(nowhere.text).toContain('it could not be fetched');
    expect(nowhere.text).not.toMatch(/ENOTFOUND|EAI_AGAIN|getaddrinfo/);
    expect((await db().query(`SELECT 1 FROM oauth_clients WHERE kind = 'cimd' AND id LIKE 'https://127.0.0.1/%'`)).rowCount).toBe(0);
  });
});

describe('tokens on /mcp', () => {
  it('an expired access token is refused', async () => {
    const who = await signedIn('member');
    const t = await tokensFor(who, await register());
    expect((await mcp(t.access_token)).status).toBe(200);
    // The per-workflow and read-only variants take the same token.
    const variant = await call('POST', '/mcp/workflows/weather?read_only=true', { body: INIT, headers: { accept: 'application/json, text/event-stream', authorization: `Bearer ${t.access_token}` } });
    expect(variant.status).toBe(200);
    await db().query(`UPDATE oauth_tokens SET expires_at = now() - interval '1 second' WHERE token_hash = $1`, [hashSecret(t.access_token)]);
    const res = await mcp(t.access_token);
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('invalid_access_token');
    expect(res.body.error.message).toContain('expired');
  });

  it('refresh tokens rotate; the previous one works once more within the grace window, never past it', async () => {
    const who = await signedIn('member');
    const clientId = await register();
    const t = await tokensFor(who, clientId);
    const refresh = (token: string) => form('/oauth/token', { grant_type: 'refresh_token', refresh_token: token, client_id: clientId, resource: resource() });
    // Two refreshes with the same token at once both succeed (the grace).
    const [r1, r2] = await Promise.all([refresh(t.refresh_token), refresh(t.refresh_token)]);
    expect([r1!.status, r2!.status]).toEqual([200, 200]);
    expect(r1!.body.refresh_token).not.toBe(t.refresh_token);
    const r4 = await refresh(r2!.body.refresh_token);
    expect(r4.status).toBe(200);
    // Another client cannot use it (and ends nothing by trying).
    const r3 = await form('/oauth/token', { grant_type: 'refresh_token', refresh_token: r4.body.refresh_token, client_id: await register(), resource: resource() });
    expect(r3.body.error).toBe('invalid_grant');
    expect((await mcp(r4.body.access_token)).status).toBe(200);
    // Past the grace window, a rotated token is refused even though its one extra use is unspent,
    // and, as a replayed refresh token, it ends the grant: the newer tokens stop too (RFC 9700 §4.14.2).
    await db().query(`UPDATE oauth_tokens SET rotated_at = now() - interval '31 seconds' WHERE token_hash = $1`, [hashSecret(r2!.body.refresh_token)]);
    expect((await refresh(r2!.body.refresh_token)).body.error).toBe('invalid_grant');
    expect((await mcp(r4.body.access_token)).body.error.code).toBe('invalid_access_token');
    expect((await refresh(r4.body.refresh_token)).body.error).toBe('invalid_grant');
  });

  it('a refresh asking for a scope the grant does not hold is invalid_scope and leaves the token unspent (RFC 6749 §6)', async () => {
    const who = await signedIn('member');
    const clientId = await register();
    const t = await tokensFor(who, clientId);
    const refresh = (scope?: string) =>
      form('/oauth/token', { grant_type: 'refresh_token', refresh_token: t.refresh_token, client_id: clientId, resource: resource(), ...(scope === undefined ? {} : { scope }) });
    for (const scope of ['mcp admin', 'admin', 'mcp:write']) {
      const res = await refresh(scope);
      expect(res.status).toBe(400);
      expect(res.body.error).toBe('invalid_scope');
      expect(res.headers.get('cache-control')).toBe('no-store');
    }
    const rotated = await db().query('SELECT rotated_at FROM oauth_tokens WHERE token_hash = $1', [hashSecret(t.refresh_token)]);
    expect(rotated.rows[0].rotated_at).toBeNull();
    // The grant's own scope (or none named) is granted as before.
    const ok = await refresh('mcp');
    expect(ok.status).toBe(200);
    expect(ok.body.scope).toBe('mcp');
    expect((await mcp(ok.body.access_token)).status).toBe(200);
    // An unknown token with a scope is still the token's refusal, not the scope's.
    const unknown = await form('/oauth/token', { grant_type: 'refresh_token', refresh_token: 'wqs_rt_unknown', client_id: clientId, scope: 'admin' });
    expect(unknown.body.error).toBe('invalid_grant');
  });

  it('a refresh token presented once more than the grace allows ends its whole grant (reuse means it leaked)', async () => {
    const who = await signedIn('member');
    const clientId = await register();
    const t = await tokensFor(who, clientId);
    const refresh = (token: string) => form('/oauth/token', { grant_type: 'refresh_token', refresh_token: token, client_id: clientId, resource: resource() });
    const [r1, r2] = await Promise.all([refresh(t.refresh_token), refresh(t.refresh_token)]);
    expect([r1!.status, r2!.status]).toEqual([200, 200]);
    const grants = async () => (await db().query('SELECT count(*)::int AS n FROM oauth_grants WHERE client_id = $1', [clientId])).rows[0].n;
    expect(await grants()).toBe(1);
    // A third use within the window: refused, and every token of that consent stops.
    expect((await refresh(t.refresh_token)).body.error).toBe('invalid_grant');
    expect(await grants()).toBe(0);
    for (const r of [r1!, r2!]) {
      expect((await mcp(r.body.access_token)).body.error.code).toBe('invalid_access_token');
      expect((await refresh(r.body.refresh_token)).body.error).toBe('invalid_grant');
    }
    // An unknown refresh token is refused as ever.
    expect((await refresh(`wqs_rt_${randomBytes(32).toString('base64url')}`)).body.error).toBe('invalid_grant');
  });

  it('revocation: RFC 7009 ends the grant; an Owner revoking the client in the console ends it at once', async () => {
    const owner = await signedIn('owner');
    const clientId = await register();
    const t = await tokensFor(owner, clientId);
    const rev = await form('/oauth/revoke', { token: t.refresh_token, client_id: clientId });
    expect(rev.status).toBe(200);
    expect((await mcp(t.access_token)).status).toBe(401);

    const t2 = await tokensFor(owner, clientId);
    expect((await mcp(t2.access_token)).status).toBe(200);
    const list = await owner.client.get('/console/mcp-clients');
    expect(list.status).toBe(200);
    expect(list.text).toContain('Refusal client');
    // A Member of the organization cannot open or use the page.
    const member = await signedIn('member', owner.org.org_id);
    expect((await member.client.get('/console/mcp-clients')).status).toBe(403);
    const revoked = await owner.client.submit('/console/mcp-clients', '/console/mcp-clients/revoke', { client_id: clientId });
    expect(revoked.status).toBe(303);
    expect((await mcp(t2.access_token)).body.error.code).toBe('invalid_access_token');
    const again = await form('/oauth/token', { grant_type: 'refresh_token', refresh_token: t2.refresh_token, client_id: clientId, resource: resource() });
    expect(again.body.error).toBe('invalid_grant');
    // Another organization's Owner cannot revoke it: 404 page.
    const t3 = await tokensFor(owner, clientId);
    const stranger = await signedIn('owner');
    expect((await stranger.client.submit('/console/mcp-clients', '/console/mcp-clients/revoke', { client_id: clientId })).status).toBe(404);
    expect((await mcp(t3.access_token)).status).toBe(200);
  });

  it("revocation by another client is ignored (200, nothing ends); tokens are stored only as hashes", async () => {
    const who = await signedIn('member');
    const clientId = await register();
    const t = await tokensFor(who, clientId);
    const intruder = await register();
    for (const token of [t.refresh_token, t.access_token]) {
      const rev = await form('/oauth/revoke', { token, client_id: intruder });
      expect(rev.status).toBe(200);
    }
    expect((await mcp(t.access_token)).status).toBe(200);
    const refreshed = await form('/oauth/token', { grant_type: 'refresh_token', refresh_token: t.refresh_token, client_id: clientId, resource: resource() });
    expect(refreshed.status).toBe(200);
    // Neither token appears in any column of its rows; each is found by its SHA-256.
    const rows = await db().query(`SELECT t.*, g.* FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id WHERE g.client_id = $1`, [clientId]);
    expect(rows.rowCount).toBeGreaterThanOrEqual(2);
    const dump = JSON.stringify(rows.rows);
    for (const secret of [t.access_token, t.refresh_token, refreshed.body.access_token, refreshed.body.refresh_token]) {
      expect(dump).not.toContain(secret.slice(7));
      expect((await db().query('SELECT 1 FROM oauth_tokens WHERE token_hash = $1', [hashSecret(secret)])).rowCount).toBe(1);
    }
  });

  it("a removed member's tokens stop at once", async () => {
    const owner = await signedIn('owner');
    const member = await signedIn('member', owner.org.org_id);
    const t = await tokensFor(member, await register());
    expect((await mcp(t.access_token)).status).toBe(200);
    await changeMember(db(), 'owner', owner.org.org_id, member.userId, null);
    const res = await mcp(t.access_token);
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('invalid_access_token');
  });

  it('a console session cookie is never an MCP credential; an API key still is', async () => {
    const who = await signedIn('owner');
    const cookie = `wqs_session=${who.client.cookies.get('wqs_session')}`;
    const res = await call('POST', '/mcp', { body: INIT, headers: { accept: 'application/json, text/event-stream', cookie } });
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('api_key_required');
    expect((await mcp(who.org.api_key)).status).toBe(200);
  });
});
