// Hostile JSON bodies on every JSON route: nesting past the depth limit and prototype keys are a
// 400 envelope before any route code runs (REST and MCP alike), never a 500 or a stack overflow.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH, jsonDepthExceeds, parseJsonBody, prototypeKeyPaths } from '../apps/api/plugins/json-body.ts';
import { balanceOf, call, closeDb, db, newOrg, stack } from './helpers/stack.ts';

let org: Awaited<ReturnType<typeof newOrg>>;
beforeAll(async () => {
  org = await newOrg(5);
});
afterAll(async () => {
  expect(Number((await db().query('SELECT count(*) FROM requests WHERE org_id = $1', [org.org_id])).rows[0].count)).toBe(0);
  expect(await balanceOf(org.org_id)).toEqual({ granted: 5, available: 5, reserved: 0, charged: 0 });
  await closeDb();
});

/** `{"a":{"a":…}}` nested `depth` levels around `leaf`. */
const nested = (depth: number, leaf = '1') => '{"a":'.repeat(depth) + leaf + '}'.repeat(depth);
const post = (path: string, rawBody: string, headers: Record<string, string> = {}) =>
  call('POST', path, { key: org.api_key, rawBody, headers: { 'content-type': 'application/json', ...headers } });

function expectDepthRefusal(res: { status: number; body: any; text: string }) {
  expect(res.status, res.text).toBe(400);
  expect(res.body.success).toBe(false);
  expect(res.body.error.code).toBe('invalid_input');
  // The body as a whole: no field to name (test/query-validation.test.ts, whole-body refusals).
  expect(res.body.error).not.toHaveProperty('param');
  expect(res.body.error.details.issues).toEqual([{ path: '', message: `nesting depth exceeds the limit of ${MAX_JSON_DEPTH}` }]);
  expect(res.text).not.toMatch(/Maximum call stack/i);
}

describe('the depth scan (pure)', () => {
  it('counts brackets outside strings only, escapes included, and stops early', () => {
    expect(jsonDepthExceeds(nested(MAX_JSON_DEPTH), MAX_JSON_DEPTH)).toBe(false);
    expect(jsonDepthExceeds(nested(MAX_JSON_DEPTH + 1), MAX_JSON_DEPTH)).toBe(true);
    expect(jsonDepthExceeds(`{"s":"${'['.repeat(10_000)}"}`, 2)).toBe(false);
    expect(jsonDepthExceeds(`{"s":"\\"${'{'.repeat(100)}\\\\"}`, 2)).toBe(false);
    expect(jsonDepthExceeds(`["\\\\",${'['.repeat(3)}]]]]`, 3)).toBe(true);
    expect(jsonDepthExceeds('['.repeat(1_000_000), MAX_JSON_DEPTH)).toBe(true);
  });

  it('parses like secure-json-parse with protoAction and constructorAction "error"', () => {
    expect(parseJsonBody('{"a":[1,{"b":null}]}')).toEqual({ a: [1, { b: null }] });
    expect(parseJsonBody('{"constructor":"fine","prototype":1}')).toEqual({ constructor: 'fine', prototype: 1 });
    expect(() => parseJsonBody('{"a":{"__proto__":{"x":1}}}')).toThrow(/__proto__/);
    expect(() => parseJsonBody('{"a":{"\\u005f_proto__":{"x":1}}}')).toThrow(/__proto__/);
    expect(() => parseJsonBody('{"constructor":{"prototype":{"x":1}}}')).toThrow(/constructor\.prototype/);
    expect(() => parseJsonBody('{"a":')).toThrow(/not valid JSON/);
    expect(({} as Record<string, unknown>).x).toBeUndefined();
  });
});

/** The walk as it was (a copy of the path for every value): the reference for the paths and their order. */
function referencePaths(text: string, max: number): string[] {
  const out: string[] = [];
  const stack: Array<{ value: unknown; path: string[] }> = [{ value: JSON.parse(text), path: [] }];
  while (stack.length > 0 && out.length < max) {
    const { value, path } = stack.pop()!;
    if (typeof value !== 'object' || value === null) continue;
    const children: Array<{ value: unknown; path: string[] }> = [];
    for (const [key, child] of Object.entries(value)) {
      if (key === '__proto__') out.push([...path, key].join('.'));
      else if (key === 'constructor' && typeof child === 'object' && child !== null && Object.hasOwn(child, 'prototype')) out.push([...path, key, 'prototype'].join('.'));
      children.push({ value: child, path: [...path, key] });
    }
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]!);
  }
  return out.slice(0, max);
}

describe('locating refused keys (pure)', () => {
  it('gives the paths the old walk gave, in its order, up to the limit', () => {
    const cases = [
      '{"__proto__":1}',
      '{"a":{"__proto__":1},"__proto__":2}',
      '{"a":[1,{"b":{"__proto__":{"__proto__":3}}}],"constructor":{"prototype":{"constructor":{"prototype":1}}},"c":{"constructor":{"x":1}}}',
      '[[{"__proto__":1}],{"10":{"__proto__":1},"2":{"constructor":{"prototype":null}}},"__proto__"]',
      '{"constructor":"fine","prototype":1,"s":"{\\"__proto__\\":1}"}',
      `{"many":[${Array.from({ length: 150 }, (_, i) => `{"k${i}":{"__proto__":${i}}}`).join(',')}]}`,
    ];
    // Random documents: nested objects and arrays with refused keys sprinkled in.
    let seed = 7;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    const gen = (depth: number): string => {
      const r = rand(depth > 6 ? 2 : 5);
      if (r < 2) return String(rand(100));
      const n = rand(5);
      if (r === 2) return `[${Array.from({ length: n }, () => gen(depth + 1)).join(',')}]`;
      const keys = ['a', 'b', '__proto__', 'constructor', 'prototype', '0', '7'];
      return `{${Array.from({ length: n }, (_, i) => `"${keys[rand(keys.length)]}${rand(3) === 0 ? '' : i}":${gen(depth + 1)}`).join(',')}}`;
    };
    for (let i = 0; i < 300; i++) cases.push(gen(0));
    let found = 0;
    for (const text of cases) {
      for (const max of [1, 3, 100]) {
        const paths = prototypeKeyPaths(text, max);
        expect(paths, text).toEqual(referencePaths(text, max));
        found += paths.length;
      }
    }
    expect(found).toBeGreaterThan(100);
  });

  it('is linear: a 1.8 MB array of 900,000 elements 60 deep with one __proto__ at its end takes milliseconds, not seconds', () => {
    const text = '['.repeat(60) + '0,'.repeat(900_000) + '{"__proto__":1}' + ']'.repeat(60);
    const started = performance.now();
    const paths = prototypeKeyPaths(text, 100);
    const ms = performance.now() - started;
    expect(paths).toEqual([`${'0.'.repeat(59)}900000.__proto__`]);
    // The old walk copied the path (60 keys) for each of the 900,000 elements: seconds here.
    expect(ms).toBeLessThan(1_000);
    // Wide objects too: 100,000 keys each holding an object, every one refused; at most `max` are spelled out.
    const wide = `{${Array.from({ length: 100_000 }, (_, i) => `"k${i}":{"__proto__":1}`).join(',')}}`;
    expect(prototypeKeyPaths(wide, 100)).toEqual(Array.from({ length: 100 }, (_, i) => `k${i}.__proto__`));
    expect(() => parseJsonBody(text)).toThrow(/__proto__/);
  });
});

describe('parse cost (pure)', () => {
  /** The fastest of five runs, in ms. */
  const fastest = (fn: () => unknown) => {
    let best = Infinity;
    for (let i = 0; i < 5; i++) {
      const started = performance.now();
      fn();
      best = Math.min(best, performance.now() - started);
    }
    return best;
  };

  it('costs a plain parse and a walk of the objects, not a JavaScript call for every value', () => {
    // 800 KB of numbers in nested arrays, with what makes the refused-key walk run (a \u escape and
    // the word constructor): every value is a reviver call, and only the arrays are walked.
    const text = `{"input":{"note":"\\u0041 constructor","a":${'['.repeat(30)}${Array(400_000).fill('7').join(',')}${']'.repeat(30)}}}`;
    expect(parseJsonBody(text)).toEqual(JSON.parse(text));
    const body = fastest(() => parseJsonBody(text));
    // A reviver that refuses nothing: what the parser cost when it refused keys with one (15 to 40
    // times a plain parse; about 150 ms of the API's one thread for this body).
    const reviver = fastest(() => JSON.parse(text, (_key, value: unknown) => value));
    expect(body).toBeLessThan(reviver / 2);
  });
});

describe('POST /v1/query', () => {
  it('depth 1500 in a 3 KB body is a 400 envelope, not a 500', async () => {
    const body = `{"api":"@weather","operation":"current_weather","input":${nested(1500)}}`;
    expect(body.length).toBeLessThan(12_000);
    const arrays = `{"api":"@weather","operation":"current_weather","input":{"city":${'['.repeat(1500)}${']'.repeat(1500)}}}`;
    expect(arrays.length).toBeLessThan(3_200);
    expectDepthRefusal(await post('/v1/query', body));
    expectDepthRefusal(await post('/v1/query', arrays));
    expectDepthRefusal(await post('/v1/query', arrays, { 'content-type': 'application/json; charset=utf-8' }));
  });

  it('within the limit the request goes on to its ordinary answer; brackets inside strings do not count', async () => {
    const deepInput = await post('/v1/query', `{"api":"@weather","operation":"current_weather","input":${nested(MAX_JSON_DEPTH - 2)}}`);
    expect(deepInput.status, deepInput.text).toBe(422);
    expect(deepInput.body.error.code).toBe('invalid_provider_input');
    const brackets = await post('/v1/query', JSON.stringify({ prompt: '['.repeat(5_000) + '"{'.repeat(500) }));
    expect(brackets.status, brackets.text).toBe(422);
    expect(brackets.body.error.code).toBe('prompt_unroutable');
  });

  it('prototype keys anywhere are a 400 envelope naming the key, param and details.issues pointing at it', async () => {
    for (const [raw, key, paths] of [
      ['{"api":"@weather","operation":"current_weather","input":{"__proto__":{"city":"x"}}}', '__proto__', ['input.__proto__']],
      ['{"api":"@weather","operation":"current_weather","input":{"constructor":{"prototype":{"city":"x"}}}}', 'constructor.prototype', ['input.constructor.prototype']],
      [
        '{"api":"@weather","operation":"current_weather","input":{"city":"x"},"response":{"schema":{"properties":{"__proto__":{}}},"mapping":[{"target":"/a","source":"/city","__proto__":1}]}}',
        '__proto__',
        ['response.schema.properties.__proto__', 'response.mapping.0.__proto__'],
      ],
    ] as const) {
      const res = await post('/v1/query', raw);
      expect(res.status, res.text).toBe(400);
      expect(res.body.error.code).toBe('invalid_input');
      expect(res.body.error.message).toContain(key);
      expect(res.body.error.param).toBe(paths[0]);
      expect(res.body.error.details.issues.map((i: { path: string }) => i.path)).toEqual(paths);
    }
  });
});

describe('/mcp', () => {
  it('a tools/call with a deeply nested input is a clean 400, never "Maximum call stack size exceeded"', async () => {
    const rpc = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"svc_run_workflow","arguments":{"api":"@weather","operation":"current_weather","input":${nested(1500)}}}}`;
    const res = await post('/mcp', rpc, { accept: 'application/json, text/event-stream' });
    expectDepthRefusal(res);
  });

  it('a nested input within the limit reaches the tool and gets its ordinary error', async () => {
    const client = new Client({ name: 'shaping-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${stack().baseUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${org.api_key}` } } }));
    try {
      let input: unknown = 'London';
      for (let i = 0; i < MAX_JSON_DEPTH - 10; i++) input = { city: input };
      const r = (await client.callTool({ name: 'svc_run_workflow', arguments: { api: '@weather', operation: 'current_weather', input } })) as CallToolResult;
      expect(r.isError).toBe(true);
      const text = (r.content[0] as { text: string }).text;
      expect(text).not.toMatch(/Maximum call stack/i);
      expect(JSON.parse(text).error.code).toBe('invalid_provider_input');
    } finally {
      await client.close();
    }
  });
});
