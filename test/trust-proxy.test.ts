// Per-address limits key on the client's address: the TCP peer unless the operator names the
// proxies in front (TRUST_PROXY). OAuth client registration (30 a minute per address) shows both:
// with the proxy named, callers behind it keep separate limits; without, a forged X-Forwarded-For
// changes nothing. Each API here is a process of this file's own, so the limits used up stay here.
import { describe, expect, it } from 'vitest';
import { ownPairPool } from './helpers/own-pair.ts';

const pool = ownPairPool('proxy');

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

  it('without it, X-Forwarded-For is a claim: a new value each time does not reset the limit', async () => {
    const api = await pool.spawn('api');
    const url = String(api.started.url);
    expect(await useUp(url, (i) => `203.0.113.${i + 1}`)).toEqual(Array(30).fill(201));
    const over = await register(url, '203.0.113.200');
    expect(over.status).toBe(429);
    expect(over.body.error).toBe('slow_down');
  });
});
