// Feedback on the real stack: rate, re-rate, remove; each refusal reason on the request status and
// as a 409 feedback_unavailable; another organization's request; ratings in the `popular` order.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, closeDb, db, newOrg, query, until, weatherOperationsWithoutAlerts } from './helpers/stack.ts';
import { foldAllRuns } from './helpers/run-counts.ts';
import { publishApi } from '../shared/db/catalog.ts';
import { createKey, grant, PLATFORM_ORG_ID } from '../shared/db/orgs.ts';
import { feedbackUnavailableReason, type RatingContext } from '../shared/db/feedback.ts';
import { weatherApi } from '../shared/catalog/demo/weather.ts';
import type { ApiDefinition } from '../shared/catalog/types.ts';

afterAll(closeDb);

const london = { api: '@weather', operation: 'current_weather', input: { city: 'London' } };
type Org = Awaited<ReturnType<typeof newOrg>>;

/** Run a query and wait until its request record is terminal; returns the request id. */
async function run(key: string, body: unknown = london, expectStatus = 200): Promise<string> {
  const res = await query(key, body);
  expect(res.status).toBe(expectStatus);
  const id = (res.body.data?.receipt ?? res.body.error?.receipt)?.request_id ?? res.headers.get('x-request-id');
  expect(id).toMatch(/^req_/);
  await until(async () => {
    const s = await status(key, id);
    return s.body.data && !['reserving', 'processing', 'refund_pending'].includes(s.body.data.status);
  });
  return id;
}

const status = (key: string, id: string) => call('GET', `/v1/query/requests/${id}`, { key });
const rate = (key: string, id: string, body: unknown) => call('POST', `/v1/query/requests/${id}/feedback`, { key, body });

async function expectRefused(key: string, id: string, reason: string) {
  const s = await status(key, id);
  expect(s.status).toBe(200);
  expect(s.body.data).toMatchObject({ can_rate: false, feedback_unavailable_reason: reason, feedback: null });
  const res = await rate(key, id, { value: 1 });
  expect(res.status).toBe(409);
  expect(res.body).toMatchObject({ success: false, error: { code: 'feedback_unavailable', status: 409, retryable: false, param: 'value', details: { reason } } });
  const rows = await db().query('SELECT count(*)::int AS n FROM request_feedback WHERE request_id = $1', [id]);
  expect(rows.rows[0].n).toBe(0);
}

async function stats(handle: string) {
  await foldAllRuns(db()); // every run so far counted, none arriving mid-test
  const r = await db().query(
    `SELECT st.rating_up::int AS up, st.rating_down::int AS down, st.completed_runs::int AS runs, st.popularity::int AS popularity
       FROM catalog_api_stats st JOIN apis a ON a.id = st.api_id WHERE a.handle = $1 AND a.visibility = 'public'`,
    [handle],
  );
  return r.rows[0] as { up: number; down: number; runs: number; popularity: number };
}

let org: Org;
beforeAll(async () => {
  org = await newOrg(50);
});

describe('rating a request', () => {
  it('rate, re-rate and remove: one rating per request, shown on the request status', async () => {
    const id = await run(org.api_key);
    const before = await status(org.api_key, id);
    expect(before.body.data).toMatchObject({ status: 'succeeded', feedback: null, can_rate: true, feedback_unavailable_reason: null });
    const s0 = await stats('@weather');
    const ledgerRows = async () => (await db().query(`SELECT count(*)::int AS n FROM credit_ledger WHERE org_id = $1`, [org.org_id])).rows[0].n as number;
    const ledger0 = await ledgerRows();

    const up = await rate(org.api_key, id, { value: 1 });
    expect(up.status).toBe(200);
    expect(up.body).toEqual({ success: true, data: { request_id: id, value: 1 } });
    expect((await status(org.api_key, id)).body.data).toMatchObject({ feedback: 1, can_rate: true });
    expect(await stats('@weather')).toMatchObject({ up: s0.up + 1, down: s0.down, popularity: s0.popularity + 5 });

    const down = await rate(org.api_key, id, { value: -1 });
    expect(down.body).toEqual({ success: true, data: { request_id: id, value: -1 } });
    expect((await status(org.api_key, id)).body.data.feedback).toBe(-1);
    expect(await stats('@weather')).toMatchObject({ up: s0.up, down: s0.down + 1, popularity: s0.popularity - 5 });
    const rows = await db().query('SELECT value FROM request_feedback WHERE request_id = $1', [id]);
    expect(rows.rows).toEqual([{ value: -1 }]);

    // The same value again changes nothing.
    expect((await rate(org.api_key, id, { value: -1 })).status).toBe(200);
    expect(await stats('@weather')).toMatchObject({ down: s0.down + 1 });

    const removed = await rate(org.api_key, id, { value: null });
    expect(removed.body).toEqual({ success: true, data: { request_id: id, value: null } });
    expect((await status(org.api_key, id)).body.data).toMatchObject({ feedback: null, can_rate: true });
    expect(await stats('@weather')).toMatchObject({ up: s0.up, down: s0.down, popularity: s0.popularity });
    // Removing again is a no-op, not an error.
    expect((await rate(org.api_key, id, { value: null })).status).toBe(200);
    // Nothing about rating is billed.
    expect(await ledgerRows()).toBe(ledger0);
  });

  it('validates the body, the id and the key', async () => {
    const id = await run(org.api_key);
    const cases: Array<[unknown, string]> = [
      [{}, 'value'],
      [{ value: 2 }, 'value'],
      [{ value: '1' }, 'value'],
      [{ value: 0 }, 'value'],
      [{ value: 1, comment: 'great' }, 'comment'],
    ];
    for (const [body, param] of cases) {
      const res = await rate(org.api_key, id, body);
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_input', param });
      expect(res.body.error.details.issues.map((i: { path: string }) => i.path)).toContain(param);
    }
    // The message says what is wrong: a missing value, or one that is not 1, -1 or null.
    const missing = await rate(org.api_key, id, {});
    expect(missing.body.error.details.issues).toEqual([expect.objectContaining({ path: 'value', message: 'is required: 1, -1, or null to remove the rating' })]);
    const wrong = await rate(org.api_key, id, { value: 2 });
    expect(wrong.body.error.details.issues).toEqual([expect.objectContaining({ path: 'value', message: 'must be 1, -1 or null' })]);
    const arr = await rate(org.api_key, id, [1]);
    expect(arr.status).toBe(400);
    expect(arr.body.error.code).toBe('invalid_input');
    const badJson = await call('POST', `/v1/query/requests/${id}/feedback`, { key: org.api_key, rawBody: '{"value":', headers: { 'content-type': 'application/json' } });
    expect(badJson.status).toBe(400);
    expect(badJson.body.error.code).toBe('invalid_input');
    const badId = await rate(org.api_key, 'req_short', { value: 1 });
    expect(badId.status).toBe(400);
    expect(badId.body.error).toMatchObject({ code: 'invalid_input', param: 'request_id' });
    const noKey = await call('POST', `/v1/query/requests/${id}/feedback`, { body: { value: 1 } });
    expect(noKey.status).toBe(401);
    expect(noKey.body.error.code).toBe('api_key_required');
    // The key is checked before the id and the body.
    const noKeyBad = await call('POST', '/v1/query/requests/req_short/feedback', { body: { value: 5 } });
    expect(noKeyBad.status).toBe(401);
    expect((await call('GET', '/v1/query/requests/req_short')).status).toBe(401);
    expect((await status(org.api_key, id)).body.data.feedback).toBeNull();
  });

  it("another organization's request and an unknown one are 404 request_not_found", async () => {
    const id = await run(org.api_key);
    const other = await newOrg(1);
    for (const value of [1, null]) {
      const res = await rate(other.api_key, id, { value });
      expect(res.status).toBe(404);
      expect(res.body.error).toMatchObject({ code: 'request_not_found', param: 'request_id' });
    }
    expect((await status(other.api_key, id)).status).toBe(404);
    const unknown = await rate(org.api_key, `req_${'x'.repeat(24)}`, { value: 1 });
    expect(unknown.status).toBe(404);
    expect((await status(org.api_key, id)).body.data.feedback).toBeNull();
  });
});

describe('refusals', () => {
  it('request_incomplete: a failed request cannot be rated', async () => {
    const id = await run(org.api_key, { ...london, input: { city: 'Atlantis' } }, 404);
    expect((await status(org.api_key, id)).body.data.status).toBe('failed');
    await expectRefused(org.api_key, id, 'request_incomplete');
  });

  it("own_api: the platform organization cannot rate the demo catalog it owns", async () => {
    const key = await createKey(db(), PLATFORM_ORG_ID);
    await grant(db(), PLATFORM_ORG_ID, 2);
    const owner = await db().query(`SELECT owner_org_id FROM apis WHERE handle = '@weather' AND visibility = 'public'`);
    expect(owner.rows[0].owner_org_id).toBe(PLATFORM_ORG_ID);
    const id = await run(key.api_key);
    await expectRefused(key.api_key, id, 'own_api');
  });

  it('private_api: a private workflow is not rated', async () => {
    const owner = await newOrg(5);
    const handle = `@fb-private-${randomBytes(3).toString('hex')}`;
    await publishApi(db(), { ...weatherApi, handle, operations: weatherOperationsWithoutAlerts() }, { ownerOrgId: owner.org_id });
    const id = await run(owner.api_key, { ...london, api: handle });
    expect((await status(owner.api_key, id)).body.data.status).toBe('succeeded');
    await expectRefused(owner.api_key, id, 'private_api');
  });

  it('expired: 30 days after completion the window is over; removing stays possible', async () => {
    const id = await run(org.api_key);
    expect((await rate(org.api_key, id, { value: 1 })).status).toBe(200);
    await db().query(`UPDATE requests SET completed_at = now() - interval '31 days' WHERE id = $1`, [id]);
    const s = await status(org.api_key, id);
    expect(s.body.data).toMatchObject({ feedback: 1, can_rate: false, feedback_unavailable_reason: 'expired' });
    const res = await rate(org.api_key, id, { value: -1 });
    expect(res.status).toBe(409);
    expect(res.body.error.details).toEqual({ reason: 'expired' });
    expect((await rate(org.api_key, id, { value: null })).body.data.value).toBeNull();
    await expectRefused(org.api_key, id, 'expired');
  });

  it('not_independent: an organization rates at most 3 requests of one workflow in 30 days', async () => {
    const o = await newOrg(10);
    const ids = [];
    for (let i = 0; i < 4; i++) ids.push(await run(o.api_key));
    for (const id of ids.slice(0, 3)) expect((await rate(o.api_key, id, { value: 1 })).status).toBe(200);
    await expectRefused(o.api_key, ids[3]!, 'not_independent');
    // The rated ones stay the organization's voice: re-rating them is fine.
    expect((await rate(o.api_key, ids[0]!, { value: -1 })).status).toBe(200);
    expect((await status(o.api_key, ids[1]!)).body.data.can_rate).toBe(true);
    // Withdrawing one frees a place.
    expect((await rate(o.api_key, ids[0]!, { value: null })).status).toBe(200);
    expect((await status(o.api_key, ids[3]!)).body.data).toMatchObject({ can_rate: true, feedback_unavailable_reason: null });
    expect((await rate(o.api_key, ids[3]!, { value: 1 })).status).toBe(200);
    // Another workflow is another voice.
    const other = await run(o.api_key, { api: '@air-quality', operation: 'air_quality', input: { city: 'London' } });
    expect((await status(o.api_key, other)).body.data.can_rate).toBe(true);
  });
});

describe('ratings sent at once', () => {
  it('obey the cap and keep the workflow\'s counters equal to the stored ratings; the balance does not move', async () => {
    const o = await newOrg(10);
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push(await run(o.api_key));
    const before = await stats('@weather');
    const balance = (await db().query('SELECT available, reserved, charged FROM credit_balances WHERE org_id = $1', [o.org_id])).rows[0];
    const answers = await Promise.all(ids.map((id) => rate(o.api_key, id, { value: 1 })));
    expect(answers.filter((a) => a.status === 200)).toHaveLength(3);
    expect(answers.filter((a) => a.status === 409 && a.body.error.details.reason === 'not_independent')).toHaveLength(3);
    // One rating changed, removed and given again, all at once.
    const rated = ids.filter((_, i) => answers[i]!.status === 200);
    await Promise.all(Array.from({ length: 12 }, (_, i) => rate(o.api_key, rated[0]!, { value: i % 3 === 0 ? null : i % 2 ? 1 : -1 })));
    const values = (await db().query('SELECT value FROM request_feedback WHERE request_id = ANY($1)', [ids])).rows.map((r) => Number(r.value));
    expect(values.length).toBeLessThanOrEqual(3);
    const after = await stats('@weather');
    expect(after.up - before.up).toBe(values.filter((v) => v === 1).length);
    expect(after.down - before.down).toBe(values.filter((v) => v === -1).length);
    expect((await db().query('SELECT available, reserved, charged FROM credit_balances WHERE org_id = $1', [o.org_id])).rows[0]).toEqual(balance);
  });
});

describe('popularity', () => {
  it('a well-rated workflow moves up the popular order; a paging cursor keeps its first page\'s view', async () => {
    const word = `zfb${randomBytes(4).toString('hex').replace(/[0-9]/g, 'q')}`;
    const operations = weatherOperationsWithoutAlerts();
    const make = (suffix: string): ApiDefinition => ({ ...weatherApi, operations, handle: `@${word}-${suffix}`, name: `${word} ${suffix} weather`, description: `Synthetic ${word}.` });
    await publishApi(db(), make('x'));
    await publishApi(db(), make('y'));
    const x = `@${word}-x`;
    const y = `@${word}-y`;
    const raterA = await newOrg(5);
    const raterB = await newOrg(5);
    await run(raterA.api_key, { ...london, api: x });
    const yReq = await run(raterA.api_key, { ...london, api: y });
    const xReq = await run(raterB.api_key, { ...london, api: x });
    await run(raterB.api_key, { ...london, api: y });
    const order = async () => {
      const res = await call('GET', `/v1/catalog?query=${word}&sort=popular`);
      expect(res.status).toBe(200);
      return res.body.data.items.map((i: { api: string }) => i.api) as string[];
    };
    // Equal runs: the older one first.
    expect(await order()).toEqual([x, y]);
    expect((await rate(raterA.api_key, yReq, { value: 1 })).status).toBe(200);
    // First pages count changes older than 2 s (commit lag), so wait for it.
    await until(async () => (await order())[0] === y, 30_000, 500);
    expect((await stats(y)).popularity).toBe((await stats(x)).popularity + 5);

    // Paging: page 1 (one item) is y; x is then rated up to a tie, which would put x (older) before
    // y. Page 2 still ranks as of page 1, so x is seen exactly once.
    const page1 = await call('GET', `/v1/catalog?query=${word}&sort=popular&limit=1`);
    expect(page1.body.data.items.map((i: { api: string }) => i.api)).toEqual([y]);
    expect((await rate(raterB.api_key, xReq, { value: 1 })).status).toBe(200);
    const page2 = await call('GET', `/v1/catalog?query=${word}&sort=popular&limit=1&cursor=${encodeURIComponent(page1.body.data.next_cursor)}`);
    expect(page2.status).toBe(200);
    expect(page2.body.data.items.map((i: { api: string }) => i.api)).toEqual([x]);
    // A bad rating sinks it below the other.
    expect((await rate(raterA.api_key, yReq, { value: -1 })).status).toBe(200);
    await until(async () => (await order()).join() === [x, y].join(), 30_000, 500);
  });
});

describe('rating changes for popular cursors', () => {
  it('a rating toggled in a loop moves one 10-second bucket row, not a row per change; the points add up', async () => {
    const o = await newOrg(5);
    const id = await run(o.api_key);
    const apiId = (await db().query(`SELECT id FROM apis WHERE handle = '@weather'`)).rows[0].id;
    const since = (await db().query('SELECT catalog_event_bucket(clock_timestamp()) AS t')).rows[0].t as Date;
    const buckets = async () =>
      (await db().query(`SELECT count(*)::int AS rows, coalesce(sum(points), 0)::int AS points FROM catalog_rating_buckets WHERE api_id = $1 AND at >= $2`, [apiId, since])).rows[0];
    const before = await buckets();
    for (let i = 0; i < 30; i++) expect((await rate(o.api_key, id, { value: i % 2 === 0 ? 1 : -1 })).status).toBe(200);
    const after = await buckets();
    // 30 changes (+5, then ±10 each) end at -1: net -5 from none. Other tests' ratings of @weather may share the buckets.
    expect(after.points - before.points).toBe(-5);
    expect(after.rows - before.rows).toBeLessThanOrEqual(3);
  });
});

describe('refusal rules (pure)', () => {
  const now = new Date('2026-06-01T00:00:00Z');
  const ok: RatingContext = {
    request_id: 'req_0123456789',
    status: 'succeeded',
    completed_at: new Date('2026-05-30T00:00:00Z'),
    is_public_api: true,
    api_id: 1,
    api_visibility: 'public',
    api_owner_org: 'org_platform',
    value: null,
    other_ratings: 0,
  };
  const reason = (c: Partial<RatingContext>, org = 'org_a') => feedbackUnavailableReason({ ...ok, ...c }, org, now);

  it('the first reason that applies wins', () => {
    expect(reason({})).toBeNull();
    // A private workflow is always its owner's: private_api, not own_api.
    expect(reason({ is_public_api: false, api_visibility: 'private', api_owner_org: 'org_a' })).toBe('private_api');
    expect(reason({ api_visibility: 'private' })).toBe('private_api');
    expect(reason({}, 'org_platform')).toBe('own_api');
    expect(reason({ status: 'failed', completed_at: new Date('2020-01-01') })).toBe('request_incomplete');
    expect(reason({ status: 'processing', completed_at: null })).toBe('request_incomplete');
    expect(reason({ completed_at: new Date(now.getTime() - 30 * 86_400_000) })).toBeNull();
    expect(reason({ completed_at: new Date(now.getTime() - 30 * 86_400_000 - 1) })).toBe('expired');
    expect(reason({ other_ratings: 2 })).toBeNull();
    expect(reason({ other_ratings: 3 })).toBe('not_independent');
    // An already rated request is the same voice.
    expect(reason({ other_ratings: 3, value: 1 })).toBeNull();
  });
});
