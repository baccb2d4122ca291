// Response shaping and its validation as pure functions: hostile pointers, prototype keys, sparse
// indexes and deep values. shapeOutput is also fed specs that never passed validation (defense in
// depth: it runs in the workflow sandbox every organization shares), and must neither throw nor
// touch Object.prototype.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { MAX_RENDERED_BYTES, MAX_SHAPE_DEPTH, clampRendering, getPointer, renderMarkdown, renderText, shapeOutput } from '../shared/format/shape.ts';
import { MAX_TARGET_INDEX, MAX_TARGETS_CHARS, parsePointer, pointerProblem, schemaIssues, sourceIssues, targetIssues } from '../shared/format/pointer.ts';
import { QueryRequest, type ResponseSpec } from '../shared/schemas/query.ts';

const output = {
  city: 'London',
  country: 'GB',
  temperature_c: 11.5,
  hourly: [
    { hour: 0, t: 10 },
    { hour: 1, t: 11 },
  ],
};

/** Everything Object.prototype and Array.prototype own, to compare before and after. */
const protoSnapshot = () => ({
  object: Object.getOwnPropertyNames(Object.prototype).sort(),
  array: Object.getOwnPropertyNames(Array.prototype).sort(),
  objectValues: Object.getOwnPropertyNames(Object.prototype).map((k) => Object.getOwnPropertyDescriptor(Object.prototype, k)),
});
let before: ReturnType<typeof protoSnapshot>;
beforeEach(() => {
  before = protoSnapshot();
});
afterEach(() => {
  expect(protoSnapshot()).toEqual(before);
  expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  expect(({} as Record<string, unknown>).response).toBeUndefined();
  expect(({} as Record<string, unknown>).x).toBeUndefined();
});

/** A spec as it might arrive unvalidated (from a replayed history, a bug, another caller). */
const unvalidated = (r: unknown) => r as ResponseSpec;
const json = (v: unknown) => JSON.parse(JSON.stringify(v));

describe('JSON Pointers', () => {
  it('parses RFC 6901 pointers and refuses everything else', () => {
    expect(parsePointer('')).toEqual([]);
    expect(parsePointer('/')).toEqual(['']);
    expect(parsePointer('/a~1b/c~0d/0')).toEqual(['a/b', 'c~d', '0']);
    for (const bad of ['a', 'a/b', '#/a', '/a~', '/a~2', '/~x', ' /a']) expect(parsePointer(bad), bad).toBeUndefined();
  });

  it('names forbidden segments, escaped or not', () => {
    expect(pointerProblem('/__proto__/response/include')).toMatch(/__proto__/);
    expect(pointerProblem('/constructor/prototype/x')).toMatch(/constructor/);
    expect(pointerProblem('/a/prototype')).toMatch(/prototype/);
    expect(pointerProblem('/a/b')).toBeUndefined();
    expect(pointerProblem('/proto')).toBeUndefined();
  });

  it('reads own properties and in-range indexes only', () => {
    expect(getPointer(output, '/hourly/1/t')).toBe(11);
    expect(getPointer(output, '/hourly/2')).toBeUndefined();
    expect(getPointer(output, '/hourly/01')).toBeUndefined();
    expect(getPointer(output, '/hourly/length')).toBeUndefined();
    expect(getPointer(output, '/constructor')).toBeUndefined();
    expect(getPointer(output, '/__proto__')).toBeUndefined();
    expect(getPointer(output, '/toString')).toBeUndefined();
    expect(getPointer(output, 'city')).toBeUndefined();
  });
});

describe('mapping targets against each other and the schema', () => {
  const schema = {
    type: 'object',
    properties: { place: { type: 'object', properties: { name: {}, code: {} } }, temps: { type: 'array', items: {} }, free: {} },
  };
  const issues = (targets: string[], s: Record<string, unknown> = schema) => targetIssues(targets, s).map((i) => `${i.path.join('.')}: ${i.message}`);

  it('accepts declared places, dense indexes and anything under a place the schema leaves open', () => {
    expect(issues(['/place/name', '/place/code', '/temps/0', '/temps/1', '/free/any/thing/0'])).toEqual([]);
    expect(issues([''], schema)).toEqual([]);
  });

  it('refuses undeclared properties, non-index array items, duplicates, leaf-and-parent, mixed kinds', () => {
    expect(issues(['/nope'])).toEqual([expect.stringMatching(/^0\.target: "nope" is not a property/)]);
    expect(issues(['/place/nope'])[0]).toMatch(/^0\.target: "nope" is not a property/);
    expect(issues(['/temps/x'])[0]).toMatch(/^0\.target: "x" is not an array index/);
    expect(issues(['/place/name', '/place/name'])).toEqual([expect.stringMatching(/^1\.target: duplicates response\.mapping\.0\.target/)]);
    expect(issues(['/place', '/place/name'])).toEqual([expect.stringMatching(/^0\.target: is also the parent of response\.mapping\.1\.target/)]);
    expect(issues(['', '/free'])[0]).toMatch(/^0\.target: is also the parent/);
    expect(issues(['/free/0', '/free/a'])[0]).toMatch(/^1\.target: mixes array indexes and property names/);
  });

  it('bounds array indexes and requires them dense, so no sparse or huge array is ever built', () => {
    expect(issues(['/free/100000000'])[0]).toMatch(new RegExp(`above the limit of ${MAX_TARGET_INDEX}`));
    expect(issues(['/temps/1'])[0]).toMatch(/dense from 0; missing 0/);
    expect(issues(['/temps/0', '/temps/3'])[0]).toMatch(/missing 1, 2/);
    expect(issues([`/free/${MAX_TARGET_INDEX}`])[0]).toMatch(/dense/);
  });
});

describe('mapping sources', () => {
  const issues = (sources: string[]) => sourceIssues(sources).map((i) => `${i.path.join('.')}: ${i.message}`);

  it('must not overlap, so a shaped output is never larger than the output', () => {
    expect(issues(['/a', '/b/c', '/b/d', '/ab'])).toEqual([]);
    expect(issues(['/a', '/a'])).toEqual(['1.source: duplicates response.mapping.0.source; each part of the output may be mapped once']);
    expect(issues(['/b/c', '/b'])).toEqual(['1.source: overlaps response.mapping.0.source; each part of the output may be mapped once']);
    expect(issues(['', '/a', '/b'])).toHaveLength(2);
    expect(issues(Array.from({ length: 1000 }, () => ''))).toHaveLength(999);
  });
});

describe('response schema checks', () => {
  it('refuses forbidden keys anywhere, remote $ref, wrong keyword types and deep nesting, without recursion', () => {
    expect(schemaIssues({ type: 'object', properties: { a: { type: 'string' } }, $ref: '#/$defs/x' })).toEqual([]);
    expect(schemaIssues({ properties: { constructor: {} } })[0]).toMatchObject({ path: ['properties', 'constructor'] });
    expect(schemaIssues({ $defs: { a: { prototype: 1 } } })[0]).toMatchObject({ path: ['$defs', 'a', 'prototype'] });
    expect(schemaIssues({ $ref: 'https://evil.example/schema.json' })[0]!.message).toMatch(/remote/);
    expect(schemaIssues({ properties: [] })[0]).toMatchObject({ path: ['properties'] });
    expect(schemaIssues({ type: 'strange' })[0]).toMatchObject({ path: ['type'] });
    expect(schemaIssues({ items: { type: 'nope' } })[0]).toMatchObject({ path: ['items', 'type'] });
    // Names inside maps of schemas and data under enum are not keywords.
    expect(schemaIssues({ $defs: { type: { type: 'string' }, properties: {} }, enum: [{ type: 1 }], default: { properties: 3 } })).toEqual([]);
    let deep: Record<string, unknown> = {};
    for (let i = 0; i < 100_000; i++) deep = { items: deep };
    expect(schemaIssues(deep)[0]!.message).toMatch(/deeper than 32/);
    expect(schemaIssues([])[0]!.message).toMatch(/JSON Schema object/);
  });

  it('the request schema names each problem under response.*', () => {
    const weather = { api: '@weather', operation: 'current_weather', input: { city: 'London' } };
    const paths = (response: unknown) => {
      const r = QueryRequest.safeParse({ ...weather, response });
      return r.success ? [] : r.error.issues.map((i) => i.path.join('.'));
    };
    expect(paths({ schema: { type: 'object', properties: { a: {} } }, mapping: [{ target: '/a', source: '/city' }] })).toEqual([]);
    expect(paths({ schema: { properties: { a: {} } }, mapping: [{ target: 'a', source: '/city' }] })).toEqual(['response.mapping.0.target']);
    expect(paths({ schema: {}, mapping: [{ target: '/a', source: '/__proto__' }] })).toEqual(['response.mapping.0.source']);
    expect(paths({ schema: {}, mapping: [{ target: '/ok', source: '/a' }, { target: '/__proto__/polluted', source: '/b' }] })).toEqual(['response.mapping.1.target']);
    expect(paths({ schema: { properties: { a: { properties: { prototype: {} } } } } })).toEqual(['response.schema.properties.a.properties.prototype']);
    expect(paths({ include: ['constructor.prototype'] })).toEqual(['response.include.0']);
    expect(paths({ exclude: ['a.__proto__'] })).toEqual(['response.exclude.0']);
    expect(paths({ schema: {}, mapping: [{ target: '/a', source: '' }, { target: '/b', source: '' }] })).toEqual(['response.mapping.1.source']);
    const long = Array.from({ length: 100 }, (_, i) => ({ target: `/${String(i).padStart(3, '0')}${'k'.repeat(990)}`, source: `/s${i}` }));
    expect(MAX_TARGETS_CHARS).toBeLessThan(100 * 994);
    expect(paths({ schema: {}, mapping: long })).toEqual(['response.mapping']);
    const longSources = long.map((m, i) => ({ target: `/t${i}`, source: m.target }));
    expect(paths({ schema: {}, mapping: longSources })).toEqual(['response.mapping']);
  });
});

describe('the QueryRequest JSON Schema', () => {
  it('states the two modes as a oneOf while validation keeps per-field messages', () => {
    const doc = z.toJSONSchema(QueryRequest, { target: 'draft-2020-12', io: 'input' }) as Record<string, any>;
    expect(doc.oneOf).toEqual([
      {
        title: 'Direct mode',
        required: ['api', 'operation', 'input'],
        not: { anyOf: [{ required: ['prompt'] }, { required: ['allowed_apis'] }, { required: ['blocked_apis'] }, { required: ['attachments'] }] },
      },
      { title: 'Prompt mode', required: ['prompt'], not: { anyOf: [{ required: ['operation'] }, { required: ['input'] }, { required: ['version'] }] } },
    ]);
    expect(doc.dependentRequired).toEqual({ visibility: ['api'] });
    expect(doc.properties.response.properties.mapping.items.properties.target.pattern).toBe('^(?:\\/(?:[^~/]|~[01])*)*$');
    const r = QueryRequest.safeParse({ prompt: 'x', input: {}, version: 1 });
    expect(r.success ? [] : r.error.issues.map((i) => i.path.join('.'))).toEqual(['input', 'version']);
  });
});

describe('shapeOutput with validated specs', () => {
  it('maps sources onto targets, arrays dense, missing sources absent (null inside arrays)', () => {
    const shaped = shapeOutput(output, {
      schema: {},
      mapping: [
        { target: '/where/name', source: '/city' },
        { target: '/temps/1', source: '/hourly/1/t' },
        { target: '/temps/0', source: '/hourly/0/t' },
        { target: '/temps/2', source: '/nope' },
        { target: '/missing', source: '/absent' },
      ],
    });
    expect(json(shaped)).toEqual({ where: { name: 'London' }, temps: [10, 11, null] });
  });

  it('the root target replaces the document; include, exclude and projection keep working', () => {
    expect(shapeOutput(output, { schema: {}, mapping: [{ target: '', source: '/hourly/0' }] })).toEqual({ hour: 0, t: 10 });
    expect(json(shapeOutput(output, { include: ['city', 'hourly.t'] }))).toEqual({ city: 'London', hourly: [{ t: 10 }, { t: 11 }] });
    expect(json(shapeOutput(output, { exclude: ['hourly', 'country'] }))).toEqual({ city: 'London', temperature_c: 11.5 });
    expect(json(shapeOutput(output, { schema: { properties: { city: {}, hourly: { items: { properties: { hour: {} } } } } } }))).toEqual({
      city: 'London',
      hourly: [{ hour: 0 }, { hour: 1 }],
    });
    expect(shapeOutput(output, { include: ['city'], format: 'text' })).toBe('City: London');
  });

  it('results are plain JSON: they serialize and read back identically', () => {
    const shaped = shapeOutput(output, { schema: {}, mapping: [{ target: '/a/0/b', source: '/city' }] });
    expect(JSON.parse(JSON.stringify(shaped))).toEqual({ a: [{ b: 'London' }] });
  });
});

describe('shapeOutput with hostile, unvalidated specs', () => {
  const hostileTargets = ['/__proto__/response/include', '/constructor/prototype/x', '/__proto__/polluted', '__proto__', 'constructor/prototype/polluted', '/prototype'];

  it('never writes through a prototype, whatever the targets', () => {
    for (const target of hostileTargets) {
      const shaped = shapeOutput(output, unvalidated({ schema: {}, mapping: [{ target, source: '/city' }] }));
      expect(json(shaped), target).toEqual({});
    }
    // Mixed with good targets: the good ones still land.
    const mixed = shapeOutput(output, unvalidated({ schema: {}, mapping: [...hostileTargets.map((target) => ({ target, source: '/city' })), { target: '/ok', source: '/city' }] }));
    expect(json(mixed)).toEqual({ ok: 'London' });
  });

  it('never reads or writes prototype keys through include, exclude or schema', () => {
    const tricky = JSON.parse('{"a":1,"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}}}');
    expect(json(shapeOutput(tricky, unvalidated({ include: ['__proto__.polluted', 'constructor.prototype.polluted', 'a'] })))).toEqual({ a: 1 });
    expect(json(shapeOutput(tricky, unvalidated({ exclude: ['__proto__', 'constructor.prototype'] })))).toEqual({ a: 1 });
    const schema = JSON.parse('{"properties":{"__proto__":{},"constructor":{"properties":{"prototype":{}}},"a":{}}}');
    expect(json(shapeOutput(tricky, unvalidated({ schema })))).toEqual({ a: 1 });
    expect(json(shapeOutput(tricky, unvalidated({ schema: {}, mapping: [{ target: '/x', source: '/__proto__/polluted' }] })))).toEqual({});
  });

  it('sparse or huge indexes never allocate: arrays come out dense', () => {
    const huge = shapeOutput(output, unvalidated({ schema: {}, mapping: [{ target: '/x/100000000', source: '/city' }] }));
    expect(json(huge)).toEqual({});
    const sparse = shapeOutput(output, unvalidated({ schema: {}, mapping: [{ target: '/x/500', source: '/city' }, { target: '/x/7', source: '/country' }] }));
    expect(json(sparse)).toEqual({ x: ['GB', 'London'] });
    const bigNumber = shapeOutput(output, unvalidated({ schema: {}, mapping: [{ target: '/x/1e9', source: '/city' }, { target: '/y/-1', source: '/city' }] }));
    expect(json(bigNumber)).toEqual({ x: { '1e9': 'London' }, y: { '-1': 'London' } });
  });

  it('conflicting targets: the first placement wins, nothing throws', () => {
    const shaped = shapeOutput(output, unvalidated({ schema: {}, mapping: [{ target: '/a', source: '/city' }, { target: '/a/b', source: '/country' }, { target: '/a', source: '/country' }] }));
    expect(json(shaped)).toEqual({ a: 'London' });
  });

  it('malformed specs are ignored, not thrown on', () => {
    for (const r of [null, 'x', 1, [], { include: 'city' }, { include: [1, null] }, { schema: {}, mapping: 'x' }, { schema: {}, mapping: [null, 1, { target: 1, source: 2 }] }, { schema: 'x' }, { format: 'pdf' }]) {
      expect(() => shapeOutput(output, unvalidated(r)), JSON.stringify(r)).not.toThrow();
    }
  });
});

describe('renderings', () => {
  it('are cut at MAX_RENDERED_BYTES with a visible note, never mid-character', () => {
    const many = { values: Array.from({ length: 400_000 }, (_, i) => i % 10) };
    expect(JSON.stringify(many).length).toBeLessThan(MAX_RENDERED_BYTES);
    const text = shapeOutput(many, { format: 'text' }) as string;
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(MAX_RENDERED_BYTES);
    expect(text).toMatch(/\[truncated: .*format json/);
    expect(clampRendering('short')).toBe('short');
    const emoji = clampRendering('😀'.repeat(100), 120);
    expect(Buffer.byteLength(emoji)).toBeLessThanOrEqual(120);
    expect(emoji).not.toContain('\uFFFD');
    expect(emoji.startsWith('😀')).toBe(true);
  });
});

describe('never throws for a spec that passed validation', () => {
  it('holds over thousands of generated specs and outputs (seeded)', () => {
    let seed = 20261123;
    const rnd = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const segs = ['a', 'b', '0', '1', '2', '', '~0', '~1', '__proto__', 'constructor', 'prototype', '100000000', 'x y', '01'];
    const pointer = () => (rnd(6) === 0 ? '' : Array.from({ length: 1 + rnd(4) }, () => `/${segs[rnd(segs.length)]}`).join('')) + (rnd(20) === 0 ? '~' : '');
    const value = (depth: number): unknown => {
      const k = rnd(depth > 3 ? 3 : 6);
      if (k === 0) return rnd(100);
      if (k === 1) return 'text';
      if (k === 2) return null;
      if (k === 3) return Array.from({ length: rnd(4) }, () => value(depth + 1));
      return Object.fromEntries(Array.from({ length: rnd(4) }, () => [segs[rnd(5)]!, value(depth + 1)]));
    };
    const schema = (depth: number): Record<string, unknown> => {
      const k = rnd(depth > 2 ? 1 : 3);
      if (k === 0) return {};
      if (k === 1) return { type: 'array', items: schema(depth + 1) };
      return { type: 'object', properties: Object.fromEntries(['a', 'b', '0'].slice(0, 1 + rnd(3)).map((p) => [p, schema(depth + 1)])) };
    };
    let accepted = 0;
    for (let i = 0; i < 3000; i++) {
      const mapping = Array.from({ length: 1 + rnd(5) }, () => ({ target: pointer(), source: pointer() }));
      const format = (['json', 'text', 'markdown'] as const)[rnd(3)];
      const response = rnd(4) === 0 ? { include: ['a', 'b.a'].slice(0, 1 + rnd(2)), format } : { schema: schema(0), mapping, format };
      const parsed = QueryRequest.safeParse({ api: '@x', operation: 'op', input: {}, response });
      if (!parsed.success) continue;
      accepted++;
      const out = value(0);
      expect(() => shapeOutput(out, parsed.data.response!), JSON.stringify({ response, out })).not.toThrow();
    }
    expect(accepted).toBeGreaterThan(100);
  });
});

describe('deep values', () => {
  let deep: unknown = 'bottom';
  for (let i = 0; i < 100_000; i++) deep = i % 2 ? [deep] : { k: deep };

  it('no shaping mode or rendering overflows the stack on an output nested 100,000 deep', () => {
    const specs: ResponseSpec[] = [
      { include: ['k'] },
      { exclude: ['k.k'] },
      { schema: { properties: { k: { items: { properties: { k: {} } } } } } },
      { schema: {}, mapping: [{ target: '/a', source: `${'/k/0'.repeat(1000)}` }] },
      { format: 'text' },
      { format: 'markdown' },
    ];
    for (const spec of specs) expect(() => shapeOutput(deep, spec), JSON.stringify(spec)).not.toThrow();
    expect(renderText(deep)).toContain('[nested too deeply to show]');
    expect(typeof renderMarkdown(deep)).toBe('string');
  });

  it('walks at most MAX_SHAPE_DEPTH levels, passing deeper values through unchanged', () => {
    let nested: unknown = { keep: 1, drop: 2 };
    for (let i = 0; i < MAX_SHAPE_DEPTH + 5; i++) nested = [nested];
    const shaped = shapeOutput(nested, { exclude: ['drop'] });
    let inner: unknown = shaped;
    while (Array.isArray(inner)) inner = inner[0];
    expect(inner).toEqual({ keep: 1, drop: 2 });
    expect(json(shapeOutput([[{ keep: 1, drop: 2 }]], { exclude: ['drop'] }))).toEqual([[{ keep: 1 }]]);
  });
});
