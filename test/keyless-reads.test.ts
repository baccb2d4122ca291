// What anonymous catalog traffic can cost organizations (apps/api/services/keyless-gate.ts): keyless
// reads of PostgreSQL are bounded at once per API process and per client address; one past a bound
// waits its turn, then gets 503 catalog_unavailable with Retry-After, while organizations' keyed
// requests are served. An API process of this file's own, behind a proxy that holds chosen catalog
// statements back (a slow database for exactly those) and trusting 127.0.0.1 as its proxy, so
// X-Forwarded-For chooses the client address.
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { API_DB_POOL_SIZE, loadConfig } from '../shared/config.ts';
import { call, closeDb, newOrg, stack, until, type Call } from './helpers/stack.ts';
import { processPool } from './helpers/processes.ts';
import { startPgProxy } from './helpers/pg-proxy.ts';

const s = () => stack();
const pool = processPool(() => ({ databaseUrl: s().databaseUrl, temporalAddress: s().temporalAddress, hostMap: s().hostMap, taskQueue: 'keyless-reads-unused' }));
afterAll(async () => {
  await pool.killAll();
  await closeDb();
});

async function api(env: Record<string, string>, databaseUrl: string) {
  const p = await pool.spawn('api', { databaseUrl, temporalAddress: s().temporalAddress, hostMap: s().hostMap, taskQueue: 'keyless-reads-unused', env: { WQS_SKIP_MIGRATIONS: '1', TRUST_PROXY: '127.0.0.1', ...env } });
  return String(p.started.url);
}

function expectWaitedTooLong(r: Call & { ms: number }) {
  expect(r.status, r.text).toBe(503);
  expect(r.body).toMatchObject({ success: false, error: { code: 'catalog_unavailable', type: 'service_error', status: 503, retryable: true } });
  expect(r.headers.get('retry-after')).toBe('1');
  expect(r.text).not.toMatch(/postgres|pg_|select /i);
}

describe('keyless reads', () => {
  it('KEYLESS_READS_IN_FLIGHT and AUTH_LOOKUPS_IN_FLIGHT together must leave the pool room for keyed requests', () => {
    expect(loadConfig({}).KEYLESS_READS_IN_FLIGHT + loadConfig({}).AUTH_LOOKUPS_IN_FLIGHT).toBeLessThan(API_DB_POOL_SIZE);
    expect(loadConfig({ KEYLESS_READS_IN_FLIGHT: '11', AUTH_LOOKUPS_IN_FLIGHT: '8' }).KEYLESS_READS_IN_FLIGHT).toBe(11);
    expect(() => loadConfig({ KEYLESS_READS_IN_FLIGHT: '12', AUTH_LOOKUPS_IN_FLIGHT: '8' })).toThrow(/KEYLESS_READS_IN_FLIGHT: .*room for keyed requests: at most 11/);
  });

  it('with their statements held back, one address holds at most KEYLESS_READS_PER_ADDRESS, all at most KEYLESS_READS_IN_FLIGHT; the rest wait, then 503 catalog_unavailable; keyed requests and sequential readers are served', async () => {
    // A word no workflow has: its search statements (and only they) are held by the proxy.
    const word = `gateheld${randomBytes(4).toString('hex')}`;
    const proxy = await startPgProxy(s().databaseUrl, () => false, (bind) => bind.includes(word));
    try {
      const url = await api({ KEYLESS_READS_IN_FLIGHT: '3', KEYLESS_READS_PER_ADDRESS: '2', KEYLESS_READ_WAIT_MS: '600' }, proxy.url);
      const org = await newOrg(1);
      const search = (from: string, query = word) =>
        call('GET', `/v1/catalog?query=${query}`, { baseUrl: url, headers: { 'x-forwarded-for': from } });
      // Nothing held: a reader asking one page after another never meets the bounds.
      for (let i = 0; i < 8; i++) expect((await search('198.51.100.1', 'weather')).status).toBe(200);

      proxy.hold();
      const started = Date.now();
      const timed = (p: Promise<Call>) => p.then((r) => ({ ...r, ms: Date.now() - started }));
      let flood: Array<Call & { ms: number }> = [];
      let others: Array<Call & { ms: number }> = [];
      let keyed: Call[] = [];
      let keyedMs = 0;
      try {
        // Six from one address: two reach PostgreSQL, four wait for that address's turn.
        const sent = Array.from({ length: 6 }, () => timed(search('198.51.100.7')));
        await until(async () => proxy.held() >= 2, 10_000, 20);
        // Two from other addresses: one takes the process's last slot, the other waits for one.
        const otherSent = [timed(search('203.0.113.5')), timed(search('2001:db8:1:2::5'))];
        await until(async () => proxy.held() >= 3, 10_000, 20);
        // An organization's keyed requests meanwhile: served at once, the pool is theirs.
        const t = Date.now();
        keyed = [await call('GET', '/v1/auth', { key: org.api_key, baseUrl: url }), await call('GET', '/v1/catalog/tools', { key: org.api_key, baseUrl: url })];
        keyedMs = Date.now() - t;
        await new Promise((r) => setTimeout(r, 900)); // past the wait: the excess has been answered
        // No more than the bound reached PostgreSQL.
        expect(proxy.held()).toBe(3);
        const m = await call('GET', '/metrics', { baseUrl: url });
        expect(m.text).toContain('wqs_keyless_reads{state="in_flight"} 3\n');
        expect(m.text).toContain('wqs_keyless_reads{state="waiting"} 0\n');
        proxy.release();
        flood = await Promise.all(sent);
        others = await Promise.all(otherSent);
      } finally {
        proxy.release();
      }
      for (const r of keyed) expect(r.status, r.text).toBe(200);
      expect(keyedMs).toBeLessThan(1_500);
      // The flooding address: two answered once released, four refused after the wait.
      expect(flood.filter((r) => r.status === 200)).toHaveLength(2);
      const refused = flood.filter((r) => r.status !== 200);
      expect(refused).toHaveLength(4);
      for (const r of refused) {
        expectWaitedTooLong(r);
        expect(r.ms).toBeGreaterThanOrEqual(550);
        expect(r.ms).toBeLessThan(3_000);
      }
      // The other addresses: the one that found a slot is answered; the one that found none, refused.
      expect(others.map((r) => r.status).sort()).toEqual([200, 503]);
      expectWaitedTooLong(others.find((r) => r.status === 503)!);
      for (const r of [...flood, ...others].filter((x) => x.status === 200)) expect(r.body.data.items).toEqual([]);

      // Released: everything answers again, and operators see the refusals.
      expect((await search('198.51.100.7')).status).toBe(200);
      const m = await call('GET', '/metrics', { baseUrl: url });
      expect(m.text).toContain('wqs_keyless_read_refusals_total 5\n');
      expect(m.text).toContain('wqs_keyless_reads{state="in_flight"} 0\n');
    } finally {
      await proxy.close();
    }
  }, 120_000);

  it('icons and catalog detail read through the same bounds', async () => {
    const word = `gateheld${randomBytes(4).toString('hex')}`;
    const proxy = await startPgProxy(s().databaseUrl, () => false, (bind) => bind.includes(word));
    try {
      const url = await api({ KEYLESS_READS_IN_FLIGHT: '1', KEYLESS_READS_PER_ADDRESS: '1', KEYLESS_READ_WAIT_MS: '300' }, proxy.url);
      proxy.hold();
      try {
        const holder = call('GET', `/v1/catalog/suggest?query=${word}`, { baseUrl: url, headers: { 'x-forwarded-for': '198.51.100.9' } });
        await until(async () => proxy.held() >= 1, 10_000, 20);
        const hash = 'a'.repeat(64);
        const icon = await call('GET', `/v1/icons/${hash}`, { baseUrl: url, headers: { 'x-forwarded-for': '203.0.113.9' } });
        const detail = await call('GET', '/v1/catalog/detail?api=@weather', { baseUrl: url, headers: { 'x-forwarded-for': '203.0.113.10' } });
        for (const r of [icon, detail]) expectWaitedTooLong({ ...r, ms: 0 });
        proxy.release();
        expect((await holder).status).toBe(200);
      } finally {
        proxy.release();
      }
      expect((await call('GET', `/v1/icons/${'a'.repeat(64)}`, { baseUrl: url })).body.error.code).toBe('icon_not_found');
      expect((await call('GET', '/v1/catalog/detail?api=@weather', { baseUrl: url })).status).toBe(200);
    } finally {
      await proxy.close();
    }
  }, 120_000);
});
