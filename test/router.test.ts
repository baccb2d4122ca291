// The prompt router on the test stack's PostgreSQL: scope filters apply before ranking (api,
// visibility, allowed/blocked handles, another organization's private APIs), routing documents
// follow publishing, abstention carries candidates, and filling never invents a value.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishApi } from '../shared/db/catalog.ts';
import type { FillTarget, PromptRouter } from '../shared/router/index.ts';
import { routerFactory } from './helpers/routers.ts';
import { syntheticApi, syntheticOp } from './catalog-fixture.ts';
import { demoCatalog } from '../shared/catalog/demo/index.ts';
import { closeDb, db, newOrg } from './helpers/stack.ts';

/** Routers made here are closed after the file (their embedding threads released). */
const createRouter = routerFactory();

const NOW = new Date('2026-11-23T12:00:00Z');
let router: PromptRouter;
let orgA: string;
let orgB: string;
const tag = Math.random().toString(36).slice(2, 8);
const privateHandle = `@tides-${tag}`;

const tidesOp = syntheticOp('tide_times', {
  label: 'Tide times',
  description: 'High and low tide times for a harbour on a day.',
  labels: ['tides', 'tide', 'harbour', 'high tide', 'low tide'],
  versions: [
    {
      version: 1,
      input_schema: {
        type: 'object',
        additionalProperties: false,
        required: ['harbour', 'date'],
        properties: {
          harbour: { type: 'string', enum: ['dover', 'brest', 'cherbourg'] },
          date: { type: 'string', format: 'date', description: 'Day, YYYY-MM-DD' },
        },
      },
      output_schema: { type: 'object' },
      examples: [],
      recipe: { engine: 'http', hosts: ['x.example.test'], steps: [], output: {} },
    },
  ],
});

beforeAll(async () => {
  orgA = (await newOrg(0, 'Router A')).org_id;
  orgB = (await newOrg(0, 'Router B')).org_id;
  // A private API of organization A that only A may be routed to.
  await publishApi(db(), syntheticApi(privateHandle, { name: 'Harbour tides', operations: [tidesOp] }), { ownerOrgId: orgA });
  router = createRouter({ db: db(), now: () => NOW });
});
afterAll(closeDb);

// Other test files publish public APIs into the same database while this one runs (synthetic ones
// with operations like `forecast`); what is asserted here is routing over the demo catalog, so those
// assertions scope to its handles, a filter applied before ranking as `allowed_apis` is.
const DEMO = demoCatalog.map((a) => a.handle);

const pick = (r: Awaited<ReturnType<PromptRouter['rank']>>) => (r.chosen ? `${r.chosen.api}.${r.chosen.operation}` : null);

describe('rank: scope filters apply before ranking', () => {
  it('routes an ordinary prompt to the demo operation it names', async () => {
    const r = await router.rank('weather forecast for Paris for 3 days', { orgId: orgB, allowedApis: DEMO });
    expect(pick(r)).toBe('@weather.forecast');
    expect(r.router).toBe('offline');
    expect(r.chosen!.score).toBeGreaterThan(0);
    expect(r.chosen!.score).toBeLessThanOrEqual(1);
    expect(r.candidates.length).toBeLessThanOrEqual(5);
    expect(r.candidates[0]).toEqual(r.chosen);
  });

  it("routes an organization's own private operation, never another organization's", async () => {
    const prompt = 'high tide times at dover tomorrow';
    const a = await router.rank(prompt, { orgId: orgA });
    expect(pick(a)).toBe(`${privateHandle}.tide_times`);
    expect(a.chosen!.visibility).toBe('private');
    const b = await router.rank(prompt, { orgId: orgB, allowedApis: DEMO });
    expect(b.candidates.map((c) => c.api)).not.toContain(privateHandle);
    expect(b.chosen?.api).not.toBe(privateHandle);
  });

  it('api and visibility keep ranking inside one API', async () => {
    const r = await router.rank('weather forecast for Paris', { orgId: orgB, api: '@air-quality' });
    expect(r.candidates.every((c) => c.api === '@air-quality')).toBe(true);
    const p = await router.rank('high tide times at dover tomorrow', { orgId: orgA, api: privateHandle, visibility: 'public' });
    expect(p.candidates).toEqual([]);
    expect(p.chosen).toBeNull();
  });

  it('allowed_apis and blocked_apis filter candidates', async () => {
    const allowed = await router.rank('typescript jobs in london', { orgId: orgB, allowedApis: ['@books', '@news'] });
    expect(allowed.candidates.every((c) => ['@books', '@news'].includes(c.api))).toBe(true);
    expect(pick(allowed)).not.toBe('@jobs.search_jobs');
    const blocked = await router.rank('typescript jobs in london', { orgId: orgB, blockedApis: ['@jobs'] });
    expect(blocked.candidates.map((c) => c.api)).not.toContain('@jobs');
    const demoOnly = await router.rank('typescript jobs in london', { orgId: orgB, allowedApis: DEMO });
    expect(pick(demoOnly)).toBe('@jobs.search_jobs');
  });

  it('a newly published operation becomes routable (routing documents follow publishing)', async () => {
    const handle = `@lighthouse-${tag}`;
    const before = await router.rank('lighthouse opening hours', { orgId: orgA, api: handle });
    expect(before.candidates).toEqual([]);
    await publishApi(
      db(),
      syntheticApi(handle, { name: 'Lighthouse visits', operations: [syntheticOp('lighthouse_hours', { label: 'Lighthouse opening hours', labels: ['lighthouse', 'opening hours'] })] }),
      { ownerOrgId: orgA },
    );
    const after = await router.rank('lighthouse opening hours', { orgId: orgA, api: handle });
    expect(pick(after)).toBe(`${handle}.lighthouse_hours`);
  });
});

describe('rank: abstention and actions', () => {
  it('abstains on a prompt no operation serves, with nothing chosen', async () => {
    const r = await router.rank('what is the capital of Australia', { orgId: orgB, allowedApis: DEMO });
    expect(r.chosen).toBeNull();
    expect(r.reason).toBeTruthy();
  });

  it('lists candidates when it abstains so a caller can go on in direct mode', async () => {
    const r = await router.rank('cancel my order ORD-100001', { orgId: orgB, allowedApis: DEMO });
    expect(r.chosen).toBeNull();
    expect(r.reason).toBe('action_not_offered');
    expect(r.candidates.map((c) => c.operation)).toContain('get_order');
  });

  it('chooses an action only when asked for it with every input in the prompt', async () => {
    expect(pick(await router.rank('order 2 NW-MUG-STL', { orgId: orgB, allowedApis: DEMO }))).toBe('@shop.place_order');
    const noSku = await router.rank('order a tent', { orgId: orgB, allowedApis: DEMO });
    expect(noSku.chosen).toBeNull();
    expect(noSku.reason).toBe('action_inputs_missing');
    // Naming the product without asking to buy it never places an order.
    const notAsked = await router.rank('NW-MUG-STL 2', { orgId: orgB, allowedApis: DEMO });
    expect(notAsked.chosen?.operation).not.toBe('place_order');
  });

  // docs/contract-decisions.md, "Actions need an explicit request": an imperative or a first-person
  // ask, not negated, hedged, asked about, someone else's wish or a reminder.
  it('an action named without being asked for (negated, hedged, a question, a reminder, a third party) runs nothing', async () => {
    for (const prompt of [
      'Is 20261124-DERM-1500 still free? I might want to book it for Chris Evans chris@evans.org',
      "I don't want to order 2 NW-MUG-STL",
      'Is it possible to order 2 NW-MUG-STL?',
      'What happens if I try to order 2 NW-MUG-STL?',
      'Remind me to order 2 NW-MUG-STL next week',
      'My colleague wants to buy 2 NW-MUG-STL; what is the price?',
      'how to order 2 NW-MUG-STL',
      'order 2 NW-MUG-STL?',
    ]) {
      // Named in a verb's place without being asked for: the router abstains, as for an action not asked.
      const r = await router.rank(prompt, { orgId: orgB, allowedApis: DEMO });
      expect(r.chosen?.performs_actions ?? false, `${prompt} -> ${pick(r)}`).toBe(false);
      expect(r.chosen, prompt).toBeNull();
      expect(r.reason, prompt).toBe('action_not_asked');
    }
    // Not in a verb's place at all: the action is never a candidate to run (a read may be).
    for (const prompt of ['Should I order 2 NW-MUG-STL?', 'I never book 20261124-DERM-1500 for Chris Evans chris@evans.org']) {
      const r = await router.rank(prompt, { orgId: orgB, allowedApis: DEMO });
      expect(r.chosen?.performs_actions ?? false, `${prompt} -> ${pick(r)}`).toBe(false);
    }
  });

  it('an explicit request still runs its action: an imperative, "please", "can you …?", "I want to", "let\'s"', async () => {
    const cases: Array<[string, string]> = [
      ['Book 20261124-DERM-1500 for Chris Evans chris@evans.org', '@clinic.book_appointment'],
      ['I want to book 20261124-DERM-1500 for Chris Evans chris@evans.org', '@clinic.book_appointment'],
      ["I'd like to book 20261124-DERM-1500 for Chris Evans chris@evans.org", '@clinic.book_appointment'],
      ['Could you please book 20261124-DERM-1500 for Chris Evans chris@evans.org?', '@clinic.book_appointment'],
      ['Please order 2 NW-MUG-STL', '@shop.place_order'],
      ['Can you order 2 NW-MUG-STL?', '@shop.place_order'],
      ["Let's order 2 NW-MUG-STL", '@shop.place_order'],
    ];
    for (const [prompt, op] of cases) expect(pick(await router.rank(prompt, { orgId: orgB, allowedApis: DEMO })), prompt).toBe(op);
  });
});

describe('fill', () => {
  const forecast: FillTarget = {
    api: '@weather',
    operation: 'forecast',
    input_schema: {
      type: 'object',
      required: ['city'],
      properties: { city: { type: 'string', description: 'City name, e.g. London' }, days: { type: 'integer', minimum: 1, maximum: 7, default: 3 } },
    },
    performs_actions: false,
    examples: [],
  };
  const history: FillTarget = {
    ...forecast,
    operation: 'weather_history',
    input_schema: {
      type: 'object',
      required: ['city', 'date'],
      properties: { city: { type: 'string', description: 'City name, e.g. London' }, date: { type: 'string', format: 'date', description: 'A past day, YYYY-MM-DD' } },
    },
  };

  it('a field named like a property every object has (toString, __proto__) is missing until filled, never taken as filled', async () => {
    // JSON.parse keeps "__proto__" as an own key, as a published schema read from the catalog does.
    const target: FillTarget = {
      ...forecast,
      input_schema: JSON.parse(
        '{"type":"object","required":["city","toString","__proto__"],"properties":{"city":{"type":"string","description":"City name"},"toString":{"type":"string","description":"A label"},"__proto__":{"type":"string","description":"A code"}}}',
      ) as FillTarget['input_schema'],
    };
    const r = await router.fill(target, 'forecast for Paris', [], { now: NOW });
    expect(r.missing).toEqual([
      { field: '/toString', description: 'A label' },
      { field: '/__proto__', description: 'A code' },
    ]);
    expect(JSON.stringify(r.input)).toBe('{"city":"Paris"}');
  });

  it('never writes a default in, and reports a missing required field with its description', async () => {
    expect(await router.fill(forecast, 'forecast for Paris', [], { now: NOW })).toEqual({ input: { city: 'Paris' }, missing: [] });
    expect(await router.fill(forecast, 'forecast please', [], { now: NOW })).toEqual({ input: {}, missing: [{ field: '/city', description: 'City name, e.g. London' }] });
  });

  it('resolves relative days in the zone the prompt names, else the one given, else UTC', async () => {
    const late = new Date('2026-11-23T20:00:00Z'); // already the 24th in Tokyo
    expect((await router.fill(history, 'weather in Tokyo yesterday', [], { now: late })).input.date).toBe('2026-11-22');
    expect((await router.fill(history, 'weather in Tokyo yesterday (Asia/Tokyo)', [], { now: late })).input.date).toBe('2026-11-23');
    expect((await router.fill(history, 'weather in Tokyo yesterday', [], { now: late, timeZone: 'Asia/Tokyo' })).input.date).toBe('2026-11-23');
    // A past-day field never takes a future day.
    expect(await router.fill(history, 'weather in Oslo tomorrow', [], { now: NOW })).toEqual({
      input: { city: 'Oslo' },
      missing: [{ field: '/date', description: 'A past day, YYYY-MM-DD' }],
    });
  });

  it('fills enum values fuzzily, ids by pattern, emails and labelled spans', async () => {
    const target: FillTarget = {
      api: '@x',
      operation: 'book_slot',
      performs_actions: true,
      examples: [],
      input_schema: {
        type: 'object',
        required: ['slot_id', 'patient_name', 'email', 'specialty'],
        properties: {
          slot_id: { type: 'string', pattern: '^[0-9]{8}-[A-Z]{4}-[0-9]{4}$' },
          patient_name: { type: 'string' },
          email: { type: 'string', format: 'email' },
          specialty: { type: 'string', enum: ['general-practice', 'dermatology'] },
        },
      },
    };
    const r = await router.fill(target, 'book 20261125-reye-0930 in dermatolgy, name: Jordan Lee, jordan.lee@example.com', [], { now: NOW });
    expect(r).toEqual({ input: { slot_id: '20261125-REYE-0930', patient_name: 'Jordan Lee', email: 'jordan.lee@example.com', specialty: 'dermatology' }, missing: [] });
    // Two enum values named: ambiguous, so neither is guessed.
    const two = await router.fill(target, 'GP or dermatology?', [], { now: NOW });
    expect(two.input.specialty).toBeUndefined();
    expect(two.missing.map((m) => m.field)).toEqual(['/slot_id', '/patient_name', '/email', '/specialty']);
  });

  it('an input attachment fills a text field; a context attachment fills nothing', async () => {
    const target: FillTarget = {
      api: '@x',
      operation: 'summarize',
      performs_actions: false,
      examples: [],
      input_schema: { type: 'object', required: ['text'], properties: { text: { type: 'string' } } },
    };
    const file = { id: 'file_abc', name: 'notes.txt', content_type: 'text/plain', text: 'Meeting notes' };
    expect((await router.fill(target, 'summarize this', [{ ...file, purpose: 'input' }], { now: NOW })).input).toEqual({ text: 'Meeting notes' });
    expect((await router.fill(target, 'summarize this', [{ ...file, purpose: 'context' }], { now: NOW })).missing).toEqual([{ field: '/text', description: 'text' }]);
  });
});
