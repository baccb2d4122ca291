// Per-address limits key on the client's address: the TCP peer unless the operator names the
// proxies in front (TRUST_PROXY). OAuth client registration (30 a minute per address) shows both:
// with the proxy named, callers behind it keep separate limits; without, a forged X-Forwarded-For
// changes nothing. Each API here is a process of this file's own, so the limits used up stay here.
import { describe, expect, it } from 'vitest';
import { ownPairPool } from './helpers/own-pair.ts';
import { ConsoleClient } from './helpers/console-http.ts';

// The suite's processes allow any number of registrations (test/helpers/processes.ts): this file's
// own APIs keep the default 30 a minute it counts on.
const pool = ownPairPool('proxy', { OAUTH_REGISTRATIONS_PER_MINUTE: '30' });

async function register(baseUrl: string, forwardedFor?: string) {
  const res = await fetch(new URL('/oauth/register', baseUrl), {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(forwardedFor ? { 'x-forwarded-for': forwardedFor } : {}) },
    body: JSON.stringify({ client_name: 'Proxy test', redirect_uris: ['https://app.example/cb'] }),
  });
  return { status: res.status, body: (await res.json()) as { error?: string } };
}

async function useUp(baseUrl: string, forwardedFor: (i: number) => string | undefined) {
  const statuses: number[] = [];
  for (let i = 0; i < 30; i++) statuses.push((await register(baseUrl, forwardedFor(i))).status);
  return statuses;
}

describe('TRUST_PROXY', () => {
  it('with the proxy named, each address behind it has its own limit', async () => {
    const api = await pool.spawn('api', { ...pool.pair, env: { ...pool.pair.env, TRUST_PROXY: '127.0.0.1, ::1' } });
    const url = String(api.started.url);
    expect(await useUp(url, () => '198.51.100.7')).toEqual(Array(30).fill(201));
    const over = await register(url, '198.51.100.7');
    expect(over.status).toBe(429);
    expect(over.body.error).toBe('slow_down');
    // Another caller behind the same proxy is not held back by the first one.
    expect((await register(url, '198.51.100.8')).status).toBe(201);
  });

  it('one client address for every per-address limit: a port a proxy writes after it, or another address of its IPv6 /64, is the same client', async () => {
    const api = await pool.spawn('api', { ...pool.pair, env: { ...pool.pair.env, TRUST_PROXY: '127.0.0.1, ::1', CONSOLE_SIGNIN_MAX_PER_IP: '2' } });
    const url = String(api.started.url);
    // OAuth registration: a new source port each time (as some proxies write X-Forwarded-For).
    expect(await useUp(url, (i) => `198.51.100.20:${40_000 + i}`)).toEqual(Array(30).fill(201));
    expect((await register(url, '198.51.100.20:50000')).status).toBe(429);
    expect((await register(url, '[2001:db8:5:6::1]:443')).status).toBe(201);
    // …and the same for an IPv6 client within its /64.
    for (let i = 0; i < 29; i++) await register(url, `2001:db8:5:6::${(i + 2).toString(16)}`);
    expect((await register(url, '2001:db8:5:6:ffff::1')).status).toBe(429);
    // Console sign-ins: failures from one address, whatever the port, share its limit (2 here).
    const c = new ConsoleClient(url);
    const csrf = await c.token('/console/sign-in');
    const signIn = (from: string, i: number) =>
      c.request('POST', '/console/sign-in', { form: { _csrf: csrf, email: `port-${i}-${Math.random().toString(36).slice(2, 8)}@example.com`, password: 'wrong password here' }, headers: { 'x-forwarded-for': from } });
    expect((await signIn('198.51.100.21:1111', 1)).status).toBe(401);
    expect((await signIn('198.51.100.21:2222', 2)).status).toBe(401);
    const blocked = await signIn('198.51.100.21:3333', 3);
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await signIn('198.51.100.22:1111', 4)).status).toBe(401);
  });

  it('without it, X-Forwarded-For is a claim: a new value each time does not reset the limit', async () => {
    const api = await pool.spawn('api');
    const url = String(api.started.url);
    expect(await useUp(url, (i) => `203.0.113.${i + 1}`)).toEqual(Array(30).fill(201));
    const over = await register(url, '203.0.113.200');
    expect(over.status).toBe(429);
    expect(over.body.error).toBe('slow_down');
  });
});
