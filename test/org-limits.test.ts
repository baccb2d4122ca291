// Limits that keep one organization from using up what every organization shares, on API/worker
// pairs of this file's own (small plan limits would disturb other files on the shared pair).
// Each case sends its burst at once and checks counts, never timings.
import { describe, expect, it } from 'vitest';
import { db, newOrg, query } from './helpers/stack.ts';
import { ownPairPool } from './helpers/own-pair.ts';

const pool = ownPairPool('org-limits');

const unroutable = { prompt: 'Translate this poem into Klingon and sing it to me' };

async function countedThisMinute(orgId: string): Promise<number> {
  const r = await db().query(
    `SELECT coalesce(sum(n), 0)::int AS n FROM request_second_counts WHERE org_id = $1 AND second > floor(extract(epoch FROM now()))::bigint - 60`,
    [orgId],
  );
  return r.rows[0].n;
}

describe('per-organization limits', () => {
  it('prompts sent at once are admitted atomically: no more are routed than the minute allows, the rest are 429 rate_limited before routing', async () => {
    const LIMIT = 4;
    const api = await pool.spawn('api', { ...pool.pair, env: { ...pool.pair.env, PLAN_REQUESTS_PER_MINUTE: String(LIMIT) } });
    const url = String(api.started.url);
    const org = await newOrg(100);
    const other = await newOrg(100);
    // The router is loaded by another organization's prompt first, so the burst's prompts are
    // routed at the speed of a warm router (a cold one would serialise them on its start-up).
    const warm = await query(other.api_key, unroutable, {}, url);
    expect(warm.status, warm.text).toBe(422);

    const burst = await Promise.all(Array.from({ length: 3 * LIMIT }, () => query(org.api_key, unroutable, {}, url)));
    const routed = burst.filter((r) => r.status === 422);
    const refused = burst.filter((r) => r.status === 429);
    expect(routed.length + refused.length, burst.map((r) => r.status).join(' ')).toBe(burst.length);
    // Each prompt routed took one request of the minute; the check and that count are one step.
    expect(routed.length, burst.map((r) => r.status).join(' ')).toBe(LIMIT);
    for (const r of routed) expect(r.body.error.code).toBe('prompt_unroutable');
    for (const r of refused) {
      expect(r.body.error.code).toBe('rate_limited');
      expect(r.headers.get('retry-after')).toMatch(/^[1-9][0-9]*$/);
      expect(r.headers.get('x-ratelimit-limit')).toBe(String(LIMIT));
      expect(r.headers.get('x-ratelimit-remaining')).toBe('0');
      expect(Number(r.headers.get('x-ratelimit-reset'))).toBeGreaterThan(Date.now() / 1000);
    }
    expect(await countedThisMinute(org.org_id)).toBe(LIMIT);
    // The other organization's minute is its own: one prompt counted.
    expect(await countedThisMinute(other.org_id)).toBe(1);
  }, 120_000);

  it('a prompt that runs is counted once in the minute, not at routing and again at its claim', async () => {
    const api = await pool.spawn('api', { ...pool.pair, env: { ...pool.pair.env, PLAN_REQUESTS_PER_MINUTE: '10' } });
    await pool.spawn('worker');
    const url = String(api.started.url);
    const org = await newOrg(100);
    const r = await query(org.api_key, { prompt: 'What is the weather in London right now?', allowed_apis: ['@weather'] }, {}, url);
    expect(r.status, r.text).toBe(200);
    expect(r.headers.get('x-ratelimit-remaining')).toBe('9');
    expect(await countedThisMinute(org.org_id)).toBe(1);
    const second = await query(org.api_key, { api: '@weather', operation: 'current_weather', input: { city: 'Paris' } }, {}, url);
    expect(second.status, second.text).toBe(200);
    expect(second.headers.get('x-ratelimit-remaining')).toBe('8');
  }, 120_000);
});
