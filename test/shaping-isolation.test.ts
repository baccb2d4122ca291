// One organization's `response` can never reach another's results, on the real stack's shared
// worker (whose workflow sandbox every organization's queries share). Organization A sends hostile
// mappings: each is refused before dispatch (400, nothing charged, no request row), and
// organization B's queries afterwards come back whole and correctly shaped. An action with a
// malformed mapping target is refused before the site is touched: no order, no charge.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../shared/config.ts';
import { addConnection, loadKeyring } from '../shared/db/connections.ts';
import { balanceOf, call, closeDb, db, demo, ledgerOf, newOrg, query } from './helpers/stack.ts';

const weather = { api: '@weather', operation: 'current_weather', input: { city: 'London' } };
const requestRows = async (orgId: string) => Number((await db().query('SELECT count(*) FROM requests WHERE org_id = $1', [orgId])).rows[0].count);

let orgA: Awaited<ReturnType<typeof newOrg>>;
let orgB: Awaited<ReturnType<typeof newOrg>>;
beforeAll(async () => {
  [orgA, orgB] = await Promise.all([newOrg(20, 'Hostile org'), newOrg(20, 'Victim org')]);
});
afterAll(closeDb);

function expectRefused(res: { status: number; body: any; text: string }, param: string) {
  expect(res.status, res.text).toBe(400);
  expect(res.body.success).toBe(false);
  expect(res.body.error.code).toBe('invalid_input');
  expect(res.body.error.param).toBe(param);
  expect(res.body.error.details.issues.map((i: { path: string }) => i.path)).toContain(param);
  expect(res.text).not.toMatch(/at .+\.ts:\d+/); // no stack trace
}

describe('prototype pollution through response.mapping', () => {
  it("organization A's hostile mappings are refused before dispatch; B's queries afterwards are whole and correct", async () => {
    // B's answer before anything hostile was tried, to compare with afterwards.
    const before = await query(orgB.api_key, weather);
    expect(before.status, before.text).toBe(200);
    const full = before.body.data.output;
    expect(Object.keys(full).sort()).toEqual(['city', 'conditions', 'country', 'humidity_pct', 'observed_at', 'temperature_c', 'wind_kph']);

    const hostile = ['/__proto__/response/include', '/constructor/prototype/x', '/__proto__/polluted', '/prototype', '/a/constructor/prototype'];
    for (const target of hostile) {
      const res = await query(orgA.api_key, { ...weather, response: { schema: { type: 'object' }, mapping: [{ target, source: '/city' }] } });
      expectRefused(res, 'response.mapping.0.target');
    }
    // Hostile sources, and a hostile target after a valid one (each item is checked).
    expectRefused(await query(orgA.api_key, { ...weather, response: { schema: {}, mapping: [{ target: '/a', source: '/__proto__' }] } }), 'response.mapping.0.source');
    expectRefused(
      await query(orgA.api_key, { ...weather, response: { schema: {}, mapping: [{ target: '/ok', source: '/city' }, { target: '/__proto__/response/format', source: '/city' }] } }),
      'response.mapping.1.target',
    );
    expectRefused(await query(orgA.api_key, { ...weather, response: { include: ['constructor.prototype'] } }), 'response.include.0');
    expectRefused(await query(orgA.api_key, { ...weather, response: { schema: { properties: { constructor: { properties: { prototype: {} } } } } } }), 'response.schema.properties.constructor');
    // A literal __proto__ key never gets past the body parser; the refusal names where it was.
    const raw = await call('POST', '/v1/query', {
      key: orgA.api_key,
      rawBody: '{"api":"@weather","operation":"current_weather","input":{"city":"London"},"response":{"schema":{},"mapping":[{"target":"/x","source":"/city"}],"__proto__":{"include":["city"]}}}',
      headers: { 'content-type': 'application/json' },
    });
    expectRefused(raw, 'response.__proto__');
    expect(raw.body.error.message).toMatch(/__proto__/);

    // Nothing of A's reached the worker, the ledger or the requests table.
    expect(await requestRows(orgA.org_id)).toBe(0);
    expect(await ledgerOf(orgA.org_id)).toEqual([]);
    expect(await balanceOf(orgA.org_id)).toEqual({ granted: 20, available: 20, reserved: 0, charged: 0 });

    // B, afterwards, on the same worker: the whole output without response ...
    const plain = await query(orgB.api_key, weather);
    expect(plain.status, plain.text).toBe(200);
    expect(plain.body.data.output).toEqual(full);
    // ... exactly the included fields with include ...
    const included = await query(orgB.api_key, { ...weather, response: { include: ['city', 'temperature_c'] } });
    expect(included.status, included.text).toBe(200);
    expect(included.body.data.output).toEqual({ city: full.city, temperature_c: full.temperature_c });
    // ... and a mapping of its own, untouched by anything A tried.
    const mapped = await query(orgB.api_key, {
      ...weather,
      response: {
        schema: { type: 'object', properties: { place: { type: 'object', properties: { name: {}, country: {} } }, readings: { type: 'array', items: {} } } },
        mapping: [
          { target: '/place/name', source: '/city' },
          { target: '/place/country', source: '/country' },
          { target: '/readings/0', source: '/temperature_c' },
          { target: '/readings/1', source: '/humidity_pct' },
        ],
      },
    });
    expect(mapped.status, mapped.text).toBe(200);
    expect(mapped.body.data.output).toEqual({ place: { name: full.city, country: full.country }, readings: [full.temperature_c, full.humidity_pct] });
    const text = await query(orgB.api_key, { ...weather, response: { include: ['city'], format: 'text' } });
    expect(text.body.data.output).toBe(`City: ${full.city}`);
    expect(await ledgerOf(orgB.org_id)).toHaveLength(10); // five queries, each reserved and settled
    expect((await balanceOf(orgB.org_id)).charged).toBe(5);
  });
});

describe('an action with a malformed mapping', () => {
  it('is refused before dispatch: no order on the site, nothing charged; the same request with a valid target orders once', async () => {
    const org = await newOrg(5, 'Shop org');
    await addConnection(db(), await loadKeyring(loadConfig()), {
      orgId: org.org_id,
      kind: 'account',
      name: 'shop_account',
      site: 'shop.example.test',
      secret: { email: 'demo@shop.example.test', password: 'correct-horse' },
    });
    const order = { api: '@shop', operation: 'place_order', input: { sku: 'NW-MUG-STL', quantity: 1 } };
    const schema = { type: 'object', properties: { confirmation: {}, total: {} } };
    const ordersBefore = (await demo('/__demo/state')).orders as number;

    for (const target of ['confirmation', 'confirmation/x', '#/confirmation', '/confirmation~2']) {
      const res = await query(org.api_key, { ...order, response: { schema, mapping: [{ target, source: '/order_id' }] } });
      expectRefused(res, 'response.mapping.0.target');
    }
    // A target the schema does not declare, and a sparse index: also before dispatch.
    expectRefused(await query(org.api_key, { ...order, response: { schema, mapping: [{ target: '/nope', source: '/order_id' }] } }), 'response.mapping.0.target');
    expectRefused(
      await query(org.api_key, { ...order, response: { schema: { type: 'object', properties: { x: { type: 'array' } } }, mapping: [{ target: '/x/100000000', source: '/order_id' }] } }),
      'response.mapping.0.target',
    );
    expect((await demo('/__demo/state')).orders).toBe(ordersBefore);
    expect(await requestRows(org.org_id)).toBe(0);
    expect(await ledgerOf(org.org_id)).toEqual([]);

    // The control: with a valid target the same request does order (so the refusals above mattered).
    const ok = await query(org.api_key, { ...order, response: { schema, mapping: [{ target: '/confirmation', source: '/order_id' }, { target: '/total', source: '/total' }] } });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.data.output).toEqual({ confirmation: expect.stringMatching(/^ORD-/), total: expect.any(Number) });
    expect((await demo('/__demo/state')).orders).toBe(ordersBefore + 1);
    expect(await balanceOf(org.org_id)).toMatchObject({ available: 4, reserved: 0, charged: 1 });
  });
});
