// A publisher's `pattern` meets a caller's prompt in the router's slot filling (shared/router/fill.ts),
// inside the API process every organization shares. The builder accepts any pattern RE2 can run,
// `^(\d|\d)*$` included; on V8's backtracking engine that pattern against a run of digits followed by
// a letter takes exponential time and holds the event loop (every other request of every organization
// waits). Filling must run it on the linear-time engine like everything else (shared/regex.ts).
import { afterAll, describe, expect, it } from 'vitest';
import { closeDb, db, ledgerOf, newOrg, stack } from './helpers/stack.ts';
import { publishApi } from '../shared/db/catalog.ts';
import { definitionIssues } from '../shared/builder/definition.ts';
import { workflowTemplate } from '../shared/builder/template.ts';

afterAll(closeDb);

const PATTERN = '^(\\d|\\d)*$';

describe("a publisher's pattern in prompt filling", () => {
  it('the builder accepts the pattern, and a prompt with a hostile token answers at once without holding the API', async () => {
    // The definition format lets any organization publish (or share, for free) this pattern.
    const template = workflowTemplate('@pattern-check') as unknown as { operations: Array<{ input_schema: Record<string, any>; examples: Array<{ input: Record<string, unknown> }> }> };
    const op = template.operations[0]!;
    const [field] = Object.keys(op.input_schema.properties);
    op.input_schema.properties[field!] = { ...op.input_schema.properties[field!], pattern: PATTERN };
    expect(definitionIssues(template)).toEqual([]);

    const owner = await newOrg(0);
    const handle = `@orders-${Math.random().toString(36).slice(2, 8)}`;
    await publishApi(
      db(),
      {
        handle,
        name: 'Order desk',
        description: 'Order status by order number',
        category: 'commerce',
        website_url: null,
        sites: [],
        operations: [
          {
            name: 'order_status',
            label: 'Order status',
            description: 'The status of an order by its number',
            cost_credits: 1,
            default_version: 1,
            versions: [
              {
                version: 1,
                input_schema: { type: 'object', additionalProperties: false, required: ['order_number'], properties: { order_number: { type: 'string', pattern: PATTERN } } },
                output_schema: {},
                examples: [],
                recipe: {},
              },
            ],
          },
        ],
      },
      { ownerOrgId: owner.org_id },
    );

    // 30 digits and a letter: about a minute per attempt on a backtracking engine (and filling tries
    // the token three ways); microseconds on a linear one.
    const prompt = `Order status of order ${'1'.repeat(30)}x please`;
    const started = Date.now();
    const bystander = (async () => {
      // Another caller's request while the prompt is being routed.
      await new Promise((r) => setTimeout(r, 300));
      const t = Date.now();
      const res = await fetch(`${stack().baseUrl}/health`, { signal: AbortSignal.timeout(20_000) });
      return { status: res.status, ms: Date.now() - t };
    })();
    const res = await fetch(`${stack().baseUrl}/v1/query`, {
      method: 'POST',
      headers: { authorization: `Bearer ${owner.api_key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ prompt, api: handle }),
      signal: AbortSignal.timeout(20_000),
    });
    const body = (await res.json()) as { success: boolean; error?: { code: string } };
    const elapsed = Date.now() - started;
    // The token does not fit the pattern: routing answers (no value for order_number), free of charge.
    expect(res.status, JSON.stringify(body)).toBeLessThan(500);
    expect(body.success).toBe(false);
    expect(['prompt_unroutable', 'prompt_input_missing']).toContain(body.error?.code);
    expect(elapsed).toBeLessThan(10_000);
    const other = await bystander;
    expect(other.status).toBeLessThan(600);
    expect(other.ms).toBeLessThan(10_000);
    expect(await ledgerOf(owner.org_id)).toEqual([]);
  });
});

describe("a publisher's enum in prompt ranking and filling", () => {
  it('an enum of thousands of values meets a long prompt of look-alike words: the answer comes at once and the API stays free', async () => {
    // The definition format bounds a definition at 512 KiB, not an enum: 2,000 values of 8 letters
    // is 22 KB. Every value and every prompt word start with the same letter, so no comparison is
    // decided by it and each takes the stems and edit distances (tens of µs): unbounded, ranking and
    // filling compared every value with every word, ~20 s of the API's one event loop per prompt.
    const word = (i: number, salt: number) => `k${((i * 7919 + salt) % 1e7).toString(36).padStart(7, 'q')}`;
    const values = Array.from({ length: 2_000 }, (_, i) => word(i, 11));
    const owner = await newOrg(0);
    const handle = `@kinds-${Math.random().toString(36).slice(2, 8)}`;
    await publishApi(
      db(),
      {
        handle,
        name: 'Kind picker',
        description: 'Pick a kind',
        category: 'other',
        website_url: null,
        sites: [],
        operations: [
          {
            name: 'pick_kind',
            label: 'Pick kind',
            description: 'Pick a kind by its name',
            cost_credits: 1,
            default_version: 1,
            versions: [
              {
                version: 1,
                input_schema: { type: 'object', additionalProperties: false, required: ['kind'], properties: { kind: { type: 'string', enum: values, description: values.slice(0, 200).join(' ') } } },
                output_schema: {},
                examples: [],
                recipe: {},
              },
            ],
          },
        ],
      },
      { ownerOrgId: owner.org_id },
    );
    // The prompt's limit is 10,000 characters: ~1,100 distinct words, none of them a value.
    const prompt = `pick kind ${Array.from({ length: 1_100 }, (_, i) => word(i, 5_000_003)).join(' ')}`.slice(0, 10_000);
    const started = Date.now();
    const bystander = (async () => {
      await new Promise((r) => setTimeout(r, 300));
      const t = Date.now();
      const res = await fetch(`${stack().baseUrl}/health`, { signal: AbortSignal.timeout(60_000) });
      return { status: res.status, ms: Date.now() - t };
    })();
    const res = await fetch(`${stack().baseUrl}/v1/query`, {
      method: 'POST',
      headers: { authorization: `Bearer ${owner.api_key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ prompt, api: handle }),
      signal: AbortSignal.timeout(60_000),
    });
    const body = (await res.json()) as { success: boolean; error?: { code: string; details?: { missing?: Array<{ field: string }> } } };
    const elapsed = Date.now() - started;
    // No value is named: a free refusal, as for any prompt that leaves a required field out.
    expect(res.status, JSON.stringify(body).slice(0, 500)).toBe(422);
    expect(['prompt_unroutable', 'prompt_input_missing']).toContain(body.error?.code);
    expect(elapsed).toBeLessThan(3_000);
    const other = await bystander;
    expect(other.status).toBeLessThan(600);
    expect(other.ms).toBeLessThan(2_000);
    expect(await ledgerOf(owner.org_id)).toEqual([]);
  });
});
