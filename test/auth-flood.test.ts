// What a flood of invalid credentials can cost other organizations (apps/api/services/credential-guard.ts):
// lookups of credentials an API process has not seen pass are bounded in flight (503
// api_key_verification_unavailable past the bound, while a key already in use keeps working), and
// failed checks are bounded per client address (429 authentication_rate_limited before PostgreSQL,
// an IPv6 address counting by its /64, a key already in use from that address still working). The
// guard's pure parts first, then API processes of this file's own: one behind a proxy that holds
// chosen key lookups back (a slow database for exactly those), others behind a named proxy
// (TRUST_PROXY) so X-Forwarded-For chooses the client address.
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { CredentialGuard } from '../apps/api/services/credential-guard.ts';
import { addressBucket } from '../apps/api/services/client-address.ts';
import { API_DB_POOL_SIZE, loadConfig } from '../shared/config.ts';
import { createKey, revokeKey } from '../shared/db/orgs.ts';
import { sha256 } from '../shared/ids.ts';
import { call, closeDb, db, newOrg, stack, until, type Call } from './helpers/stack.ts';
import { processPool } from './helpers/processes.ts';
import { startPgProxy } from './helpers/pg-proxy.ts';
import { signedIn } from './helpers/console-http.ts';

const s = () => stack();
const pool = processPool(() => ({ databaseUrl: s().databaseUrl, temporalAddress: s().temporalAddress, hostMap: s().hostMap, taskQueue: 'auth-flood-unused' }));
afterAll(async () => {
  await pool.killAll();
  await closeDb();
});

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
/** A well-formed key nobody issued. */
const inventedKey = () => `svc_sk_${Array.from(randomBytes(40), (b) => ALNUM[b % ALNUM.length]).join('')}`;
const MCP = { accept: 'application/json, text/event-stream' };
const ping = { jsonrpc: '2.0', id: 1, method: 'ping' };

/** An API of this file's own (`env` on top of the harness's), reached at the returned URL. */
async function api(env: Record<string, string>, databaseUrl = s().databaseUrl) {
  const p = await pool.spawn('api', { databaseUrl, temporalAddress: s().temporalAddress, hostMap: s().hostMap, taskQueue: 'auth-flood-unused', env: { WQS_SKIP_MIGRATIONS: '1', ...env } });
  return String(p.started.url);
}

/** GET /v1/auth with `key` as the client at `from` (the API must trust 127.0.0.1 as its proxy). */
const authAs = (baseUrl: string, key: string, from?: string) => call('GET', '/v1/auth', { key, baseUrl, headers: from ? { 'x-forwarded-for': from } : {} });

/** The API's /metrics text. */
async function metricsOf(baseUrl: string): Promise<string> {
  const r = await call('GET', '/metrics', { baseUrl });
  expect(r.status).toBe(200);
  return r.text;
}

function expectRateLimited(r: Call, burst: number): number {
  expect(r.status, r.text).toBe(429);
  expect(r.body).toMatchObject({
    success: false,
    error: { type: 'rate_limit_error', code: 'authentication_rate_limited', status: 429, retryable: true, doc_url: expect.stringMatching(/\/docs\/errors#authentication_rate_limited$/) },
  });
  expect(r.body.error.details).toMatchObject({ burst });
  expect(r.headers.get('retry-after')).toMatch(/^[1-9][0-9]*$/);
  return Number(r.headers.get('retry-after'));
}

describe('the guard (pure)', () => {
  it("AUTH_LOOKUPS_IN_FLIGHT must leave room in the API's pool for keys in use", () => {
    // With the keyless reads' slots (test/keyless-reads.test.ts), at most 19 of the 20.
    expect(loadConfig({ AUTH_LOOKUPS_IN_FLIGHT: String(API_DB_POOL_SIZE - 2), KEYLESS_READS_IN_FLIGHT: '1' }).AUTH_LOOKUPS_IN_FLIGHT).toBe(API_DB_POOL_SIZE - 2);
    expect(() => loadConfig({ AUTH_LOOKUPS_IN_FLIGHT: String(API_DB_POOL_SIZE - 1), KEYLESS_READS_IN_FLIGHT: '1' })).toThrow(/KEYLESS_READS_IN_FLIGHT: .*at most 0/);
    expect(() => loadConfig({ AUTH_LOOKUPS_IN_FLIGHT: String(API_DB_POOL_SIZE) })).toThrow(/AUTH_LOOKUPS_IN_FLIGHT: must leave the API's 20 pooled connections room/);
  });

  it('an address counts as itself, IPv4-mapped as IPv4, IPv6 by its /64', () => {
    expect(addressBucket('198.51.100.7')).toBe('198.51.100.7');
    expect(addressBucket('::ffff:198.51.100.7')).toBe('198.51.100.7');
    expect(addressBucket('2001:db8:1:2::5')).toBe('2001:db8:1:2::/64');
    expect(addressBucket('2001:0db8:0001:0002:ffff:ffff:ffff:ffff')).toBe('2001:db8:1:2::/64');
    expect(addressBucket('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(addressBucket('::1')).toBe('0:0:0:0::/64');
    // Fastify's request.ip is undefined once the client reset the connection: one bucket, no TypeError.
    expect(addressBucket(undefined)).toBe('unknown');
    expect(addressBucket('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    expect(addressBucket('2001:db8:1:3::5')).not.toBe(addressBucket('2001:db8:1:2::5'));
  });

  it("a proxy's `address:port` (Azure's Application Gateway writes X-Forwarded-For so) counts as the address: a new source port is not a new bucket", () => {
    expect(addressBucket('198.51.100.7:4567')).toBe('198.51.100.7');
    expect(addressBucket('[2001:db8:1:2::5]:443')).toBe('2001:db8:1:2::/64');
    expect(addressBucket('[2001:db8:1:2::5]')).toBe('2001:db8:1:2::/64');
    expect(addressBucket('[::ffff:198.51.100.7]:80')).toBe('198.51.100.7');
    // IPv4-mapped in hex is that IPv4 address, not the /64 of every mapped address.
    expect(addressBucket('::ffff:c633:6407')).toBe('198.51.100.7');
    expect(addressBucket('0:0:0:0:0:ffff:198.51.100.7')).toBe('198.51.100.7');
  });

  it('the map of failure buckets stays bounded: addresses rotated through, and buckets that refilled, are forgotten', async () => {
    let now = 0;
    const guard = new CredentialGuard({ lookupsInFlight: 1, lookupWaitMs: 0, failures: { perSecond: 1, burst: 3 }, addressesMax: 100, knownMax: 10 }, () => now);
    for (let i = 0; i < 10_000; i++) guard.failed(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);
    expect(guard.addresses).toBe(100);
    // One /64 is one bucket, whatever the last 64 bits.
    for (let i = 0; i < 1_000; i++) guard.failed(`2001:db8:7:7:${i.toString(16)}::1`);
    expect(guard.addresses).toBe(100);
    let lookups = 0;
    const lookup = async () => (lookups++, { ok: false as const });
    await expect(guard.check('2001:db8:7:7::3', inventedKey(), lookup)).rejects.toMatchObject({ code: 'authentication_rate_limited' });
    expect(lookups).toBe(0);
    // After a full refill a sweep drops every bucket (the address that fails now starts afresh).
    now = 10_000;
    guard.failed('192.0.2.1');
    expect(guard.addresses).toBe(1);
  });
});

describe('the guard gives back what it holds (pure)', () => {
  const limits = (burst: number, lookupWaitMs = 30) => ({ lookupsInFlight: 1, lookupWaitMs, failures: { perSecond: 0.001, burst }, addressesMax: 10, knownMax: 10 });
  const notFound = async () => ({ ok: false as const });
  /** The lookup starts a microtask after check() is called. */
  const tick = () => new Promise((r) => setImmediate(r));

  it('a lookup that throws (database down) is 503 for it and every check sharing it, and gives back its slot and its token', async () => {
    const guard = new CredentialGuard(limits(1));
    const key = inventedKey();
    let fail!: (e: Error) => void;
    const first = guard.check('192.0.2.5', key, () => new Promise<never>((_, reject) => (fail = reject)));
    const sharing = guard.check('192.0.2.6', key, () => Promise.reject(new Error('never called: it shares the lookup in flight')));
    expect(guard.lookups).toEqual({ inFlight: 1, waiting: 0 });
    await tick();
    fail(new Error('connection refused'));
    for (const p of [first, sharing]) await expect(p).rejects.toMatchObject({ code: 'api_key_verification_unavailable' });
    expect(guard.lookups).toEqual({ inFlight: 0, waiting: 0 });
    // An outage charges nobody: with a burst of one, both addresses still get their lookup.
    let looked = 0;
    for (const ip of ['192.0.2.5', '192.0.2.6']) await guard.check(ip, inventedKey(), () => (looked++, notFound()));
    expect(looked).toBe(2);
  });

  it('a check that gave up waiting is never handed the slot afterwards; one still waiting is, and the slot is free at the end', async () => {
    const guard = new CredentialGuard(limits(10));
    let release!: () => void;
    const slow = guard.check('192.0.2.7', inventedKey(), () => new Promise<{ ok: false }>((r) => (release = () => r({ ok: false }))));
    await expect(guard.check('192.0.2.8', inventedKey(), notFound)).rejects.toMatchObject({ code: 'api_key_verification_unavailable' });
    expect(guard.lookups).toEqual({ inFlight: 1, waiting: 0 });
    const patient = new CredentialGuard(limits(10, 5_000));
    let releaseP!: () => void;
    const holder = patient.check('192.0.2.9', inventedKey(), () => new Promise<{ ok: false }>((r) => (releaseP = () => r({ ok: false }))));
    const waiter = patient.check('192.0.2.10', inventedKey(), notFound);
    expect(patient.lookups).toEqual({ inFlight: 1, waiting: 1 });
    await tick();
    releaseP();
    expect(await holder).toEqual({ ok: false });
    expect(await waiter).toEqual({ ok: false });
    expect(patient.lookups).toEqual({ inFlight: 0, waiting: 0 });
    release();
    expect(await slow).toEqual({ ok: false });
    expect(guard.lookups).toEqual({ inFlight: 0, waiting: 0 });
  });
});

describe('a flood of invalid keys on an API process', () => {
  it('with their lookups held back, requests past AUTH_LOOKUPS_IN_FLIGHT get 503 api_key_verification_unavailable quickly; a key in use of another organization is served meanwhile', async () => {
    const CAP = 4;
    const keys = Array.from({ length: 30 }, inventedKey);
    const held = new Set(keys.map((k) => sha256(k).toString('latin1')));
    // Only the invented keys' lookups are held: a slow database for them, the rest goes through.
    const proxy = await startPgProxy(s().databaseUrl, () => false, (bind) => [...held].some((h) => bind.includes(h)));
    try {
      const url = await api({ AUTH_LOOKUPS_IN_FLIGHT: String(CAP), AUTH_LOOKUP_WAIT_MS: '300' }, proxy.url);
      const other = await newOrg(1);
      expect((await authAs(url, other.api_key)).status).toBe(200); // in use: this process saw it pass

      proxy.hold();
      let flood: Array<Call & { ms: number }> = [];
      let theirs: Call[] = [];
      let theirsMs = 0;
      try {
        const started = Date.now();
        // Half on /v1, half as MCP bearer keys: one bound for both.
        const sent = keys.map((key, i) =>
          (i % 2 ? call('POST', '/mcp', { key, baseUrl: url, body: ping, headers: MCP }) : authAs(url, key)).then((r) => ({ ...r, ms: Date.now() - started })),
        );
        await until(async () => proxy.held() >= CAP, 10_000, 20);
        await new Promise((r) => setTimeout(r, 800)); // past the wait: the excess has been answered
        // No more than the bound reached PostgreSQL.
        expect(proxy.held()).toBe(CAP);
        const t = Date.now();
        theirs = [await authAs(url, other.api_key), await call('POST', '/mcp', { key: other.api_key, baseUrl: url, body: ping, headers: MCP })];
        theirsMs = Date.now() - t;
        expect(proxy.held()).toBe(CAP);
        proxy.release();
        flood = await Promise.all(sent);
      } finally {
        proxy.release();
      }
      // The organization whose key is in use was served at once, on both routes.
      for (const r of theirs) expect(r.status, r.text).toBe(200);
      expect(theirsMs).toBeLessThan(1_500);
      // The excess: the spec's 503 with Retry-After, after the bounded wait, not the pool's 5 s.
      const unavailable = flood.filter((r) => r.status === 503);
      expect(unavailable).toHaveLength(keys.length - CAP);
      for (const r of unavailable) {
        expect(r.body.error).toMatchObject({ code: 'api_key_verification_unavailable', type: 'service_error', status: 503, retryable: true });
        expect(r.headers.get('retry-after')).toMatch(/^[1-9][0-9]*$/);
        expect(r.ms).toBeLessThan(3_000);
      }
      // The held ones, released, are the 401 they always were.
      for (const r of flood.filter((x) => x.status !== 503)) expect(r.body.error.code, r.text).toBe('invalid_api_key');
      // Operators see the refusals and that nothing is held any more.
      const m = await metricsOf(url);
      expect(m).toContain(`wqs_credential_refusals_total{code="api_key_verification_unavailable"} ${keys.length - CAP}\n`);
      expect(m).toContain('wqs_credential_refusals_total{code="authentication_rate_limited"} 0\n');
      expect(m).toContain('wqs_credential_lookups{state="in_flight"} 0\n');
      expect(m).toContain('wqs_credential_lookups{state="waiting"} 0\n');
    } finally {
      await proxy.close();
    }
  }, 120_000);

  it("a key in use is bounded by its organization: at most AUTH_LOOKUPS_IN_FLIGHT of one organization's lookups reach PostgreSQL, the rest queue as long as the pool's wait, then 503; another organization's key in use is served meanwhile", async () => {
    const CAP = 4;
    const flooder = await newOrg(1);
    const other = await newOrg(1);
    // Only the flooding organization's key lookups are held: a slow database for exactly those.
    const hash = sha256(flooder.api_key).toString('latin1');
    const proxy = await startPgProxy(s().databaseUrl, () => false, (bind) => bind.includes(hash));
    try {
      const url = await api({ AUTH_LOOKUPS_IN_FLIGHT: String(CAP), AUTH_LOOKUP_WAIT_MS: '300' }, proxy.url);
      // Both keys in use: each passed in this process.
      for (const key of [flooder.api_key, other.api_key]) expect((await authAs(url, key)).status).toBe(200);
      /** 12 checks of the flooding key with its lookups held for `holdMs`: how they were answered. */
      const burst = async (holdMs: number) => {
        proxy.hold();
        try {
          const sent = Array.from({ length: 12 }, () => authAs(url, flooder.api_key));
          await until(async () => proxy.held() >= CAP, 10_000, 20);
          await new Promise((r) => setTimeout(r, holdMs));
          expect(proxy.held()).toBe(CAP); // no more than the bound reached PostgreSQL
          const theirs = await authAs(url, other.api_key);
          expect(theirs.status, theirs.text).toBe(200);
          proxy.release();
          return await Promise.all(sent);
        } finally {
          proxy.release();
        }
      };
      // A burst shorter than the pool's wait queues and is served, as it was on the pool.
      expect((await burst(500)).map((r) => r.status)).toEqual(Array(12).fill(200));
      // Held past the pool's 5 s wait, the excess gets the spec's 503.
      const late = await burst(5_500);
      const unavailable = late.filter((r) => r.status === 503);
      expect(unavailable).toHaveLength(12 - CAP);
      for (const r of unavailable) expect(r.body.error).toMatchObject({ code: 'api_key_verification_unavailable', retryable: true });
      expect(late.filter((r) => r.status === 200)).toHaveLength(CAP);
      expect(await metricsOf(url)).toContain(`wqs_credential_refusals_total{code="api_key_verification_unavailable"} ${12 - CAP}\n`);
    } finally {
      await proxy.close();
    }
  }, 120_000);

  it('failed checks from one address: past the burst, 429 authentication_rate_limited before any lookup; a key in use there still works; other addresses and /64s are not affected', async () => {
    const BURST = 5;
    // A token every 20 s: the counts are exact whatever the machine's load.
    // Lookups of the credentials in `watched` are counted on their way to PostgreSQL (never held).
    const watched = new Set<string>();
    const watch = (secret: string) => (watched.add(sha256(secret).toString('latin1')), secret);
    const proxy = await startPgProxy(s().databaseUrl, () => false, (bind) => [...watched].some((h) => bind.includes(h)));
    try {
      const url = await api({ TRUST_PROXY: '127.0.0.1, ::1', AUTH_FAILURES_PER_ADDRESS_BURST: String(BURST), AUTH_FAILURES_PER_ADDRESS_PER_SECOND: '0.05' }, proxy.url);
      const as = (from: string) => ({ 'x-forwarded-for': from });
      const inUse = await newOrg(1);
      const bad = '198.51.100.7';
      expect((await authAs(url, inUse.api_key, bad)).status).toBe(200);

      const revoked = await newOrg(1);
      await revokeKey(db(), revoked.api_key);
      const expired = await createKey(db(), revoked.org_id, new Date(Date.now() - 1000));
      // Each kind of failed check counts: unknown, malformed, revoked, expired, and an unknown MCP access token.
      expect((await authAs(url, inventedKey(), bad)).body.error.code).toBe('invalid_api_key');
      expect((await authAs(url, 'svc_sk_short', bad)).body.error.code).toBe('invalid_api_key');
      expect((await authAs(url, revoked.api_key, bad)).body.error.code).toBe('revoked_api_key');
      expect((await authAs(url, expired.api_key, bad)).body.error.code).toBe('expired_api_key');
      const token = `wqs_at_${randomBytes(32).toString('base64url').slice(0, 43)}`;
      const mcpToken = await call('POST', '/mcp', { key: token, baseUrl: url, body: ping, headers: { ...MCP, ...as(bad) } });
      expect(mcpToken.body.error.code, mcpToken.text).toBe('invalid_access_token');

      // The bucket is empty: whatever would need a lookup is refused before PostgreSQL, on every route.
      watch(token);
      expect(expectRateLimited(await authAs(url, watch(inventedKey()), bad), BURST)).toBeGreaterThanOrEqual(15);
      expectRateLimited(await call('POST', '/mcp', { key: watch(inventedKey()), baseUrl: url, body: ping, headers: { ...MCP, ...as(bad) } }), BURST);
      expectRateLimited(await call('POST', '/mcp', { key: token, baseUrl: url, body: ping, headers: { ...MCP, ...as(bad) } }), BURST);
      expectRateLimited(await call('POST', '/v1/query', { key: watch(inventedKey()), baseUrl: url, body: {}, headers: as(bad) }), BURST);
      // A key never seen pass here needs a lookup too: only keys in use are spared.
      const fresh = await newOrg(1);
      expectRateLimited(await authAs(url, watch(fresh.api_key), bad), BURST);
      expect(proxy.matched()).toBe(0);
      // A malformed key needs no lookup: still its 401.
      expect((await authAs(url, 'svc_sk_short', bad)).body.error.code).toBe('invalid_api_key');

      // The key already in use from that address still works (REST and MCP).
      expect((await authAs(url, inUse.api_key, bad)).status).toBe(200);
      const theirMcp = await call('POST', '/mcp', { key: inUse.api_key, baseUrl: url, body: ping, headers: { ...MCP, ...as(bad) } });
      expect(theirMcp.status, theirMcp.text).toBe(200);
      // Another address is not affected, and the fresh key works from there.
      expect((await authAs(url, inventedKey(), '198.51.100.8')).body.error.code).toBe('invalid_api_key');
      expect((await authAs(url, fresh.api_key, '198.51.100.8')).status).toBe(200);
      expect(proxy.matched()).toBe(1);

      // IPv6: the addresses of one /64 share a bucket; the next /64 has its own.
      for (let i = 0; i < BURST; i++) expect((await authAs(url, inventedKey(), `2001:db8:1:2::${i + 1}`)).status).toBe(401);
      expectRateLimited(await authAs(url, inventedKey(), '2001:db8:1:2:ffff:ffff:ffff:fff0'), BURST);
      expect((await authAs(url, inventedKey(), '2001:db8:1:3::1')).status).toBe(401);
      // Six refusals, from two buckets still drained (198.51.100.7 and 2001:db8:1:2::/64) and two
      // that are not (198.51.100.8, 2001:db8:1:3::/64: one failure each).
      const m = await metricsOf(url);
      expect(m).toContain('wqs_credential_refusals_total{code="authentication_rate_limited"} 6\n');
      expect(m).toContain('wqs_credential_failure_addresses 4\n');
      // A proxy that writes the client's source port (`address:port`): each connection a new port,
      // one bucket all the same.
      for (let i = 0; i < BURST; i++) expect((await authAs(url, inventedKey(), `192.0.2.77:${40_000 + i}`)).status).toBe(401);
      expectRateLimited(await authAs(url, inventedKey(), '192.0.2.77:40999'), BURST);
      expectRateLimited(await authAs(url, inventedKey(), '[::ffff:192.0.2.77]:41000'), BURST);
    } finally {
      await proxy.close();
    }
  }, 120_000);

  it('the bucket refills: after Retry-After the address is checked again', async () => {
    const url = await api({ TRUST_PROXY: '127.0.0.1', AUTH_FAILURES_PER_ADDRESS_BURST: '2', AUTH_FAILURES_PER_ADDRESS_PER_SECOND: '1' });
    const from = '203.0.113.9';
    const burst = await Promise.all(Array.from({ length: 6 }, () => authAs(url, inventedKey(), from)));
    // Two at once reserve the bucket; the others are refused before their lookup.
    expect(burst.filter((r) => r.status === 401).length).toBeGreaterThanOrEqual(2);
    const refused = burst.filter((r) => r.status === 429);
    expect(refused.length).toBeGreaterThanOrEqual(3);
    const wait = Math.max(...refused.map((r) => expectRateLimited(r, 2)));
    expect(wait).toBeLessThanOrEqual(1);
    await new Promise((r) => setTimeout(r, wait * 1000 + 100));
    expect((await authAs(url, inventedKey(), from)).body.error.code).toBe('invalid_api_key');
  }, 60_000);

  it('the buckets are bounded: past AUTH_FAILURE_ADDRESSES_MAX the address that failed longest ago is forgotten', async () => {
    const url = await api({ TRUST_PROXY: '127.0.0.1', AUTH_FAILURES_PER_ADDRESS_BURST: '2', AUTH_FAILURES_PER_ADDRESS_PER_SECOND: '0.05', AUTH_FAILURE_ADDRESSES_MAX: '3' });
    for (let i = 0; i < 2; i++) await authAs(url, inventedKey(), '192.0.2.1');
    expectRateLimited(await authAs(url, inventedKey(), '192.0.2.1'), 2);
    // Two more addresses: three buckets, the first still kept.
    for (const from of ['192.0.2.2', '192.0.2.3']) expect((await authAs(url, inventedKey(), from)).status).toBe(401);
    expectRateLimited(await authAs(url, inventedKey(), '192.0.2.1'), 2);
    // A fourth: the oldest bucket goes, so memory does not grow with the addresses an attacker rotates through.
    expect((await authAs(url, inventedKey(), '192.0.2.4')).status).toBe(401);
    expect((await authAs(url, inventedKey(), '192.0.2.1')).body.error.code).toBe('invalid_api_key');
  }, 60_000);
});

describe('console session cookies', () => {
  /** A well-formed session id nobody was given (32 random bytes, base64url). */
  const inventedSession = () => randomBytes(32).toString('base64url');

  it('are checked like keys: invented ones count against the address, then a 429 page before PostgreSQL; a session in use is served; a dead cookie is cleared', async () => {
    const url = await api({ TRUST_PROXY: '127.0.0.1', AUTH_FAILURES_PER_ADDRESS_BURST: '3', AUTH_FAILURES_PER_ADDRESS_PER_SECOND: '0.05' });
    const from = '198.51.100.23';
    const { client } = await signedIn('owner', undefined, url);
    // In use from the flooding address, and seen pass in this process before the flood.
    expect((await client.get('/console', { 'x-forwarded-for': from })).status).toBe(200);
    const withCookie = (id: string, address = from) =>
      fetch(`${url}/console`, { headers: { cookie: `wqs_session=${id}`, 'x-forwarded-for': address }, redirect: 'manual' });
    for (let i = 0; i < 3; i++) {
      const res = await withCookie(inventedSession());
      // Treated as signed out (to the sign-in page), and the cookie of no session is cleared.
      expect(res.status).toBe(303);
      expect(res.headers.get('location')).toMatch(/^\/console\/sign-in/);
      expect(res.headers.getSetCookie().some((c) => /^wqs_session=;/.test(c))).toBe(true);
    }
    const refused = await withCookie(inventedSession());
    expect(refused.status).toBe(429);
    expect(refused.headers.get('content-type')).toMatch(/^text\/html/);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    const page = await refused.text();
    expect(page).toContain('Too many attempts');
    expect(page).not.toMatch(/authentication_rate_limited|stack|postgres/i);
    // The session in use from that address is not locked out; another address is not refused.
    expect((await client.get('/console', { 'x-forwarded-for': from })).status).toBe(200);
    expect((await withCookie(inventedSession(), '203.0.113.23')).status).toBe(303);
    const metrics = await metricsOf(url);
    expect(metrics).toContain('wqs_credential_refusals_total{code="authentication_rate_limited"} 1\n');
  }, 60_000);
});
