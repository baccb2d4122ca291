// max_chars shortening (apps/api/mcp/shorten.ts) as a pure function: the measured length is the
// JSON text's, lists go before strings, and many lists of one size are shortened together.
import { describe, expect, it } from 'vitest';
import { measure, shorten } from '../apps/api/mcp/shorten.ts';

describe('max_chars shortening', () => {
  it('measures exactly the length of the JSON text, escapes and missing values included', () => {
    const values: unknown[] = [
      null,
      0,
      -1.5e-7,
      true,
      '',
      'plain',
      'quote " backslash \\ newline \n tab \t control \u0001 emoji 😀 lone \ud800 é',
      [],
      {},
      [1, 'two', null, [3, [4, []]], { a: [] }],
      { 'key "quoted"': { nested: [{ x: 1 }, { y: 'z' }] }, skipped: undefined, after: false },
      Array.from({ length: 50 }, (_, i) => ({ i, s: 'x'.repeat(i), l: Array.from({ length: i % 5 }, () => i) })),
    ];
    for (const v of values) expect(measure(v).total, JSON.stringify(v)).toBe(JSON.stringify(v).length);
    const inner = [1, 2];
    const { lists } = measure({ a: [inner, []] });
    expect(lists.map((l) => [l.list, l.chars])).toEqual([
      [inner, 5],
      [[inner, []], 10],
    ]);
  });

  it('leaves an output that fits alone', () => {
    const v = { rows: [1, 2, 3] };
    expect(shorten(v, 100)).toEqual({ value: v, truncated: false, fullChars: JSON.stringify(v).length });
  });

  it('shortens the long list and keeps valid JSON with the head of the list', () => {
    const v = { title: 'Results', rows: Array.from({ length: 1000 }, (_, i) => ({ id: i, name: `row ${i}` })) };
    const r = shorten(v, 2000);
    expect(r.truncated).toBe(true);
    expect(r.fullChars).toBe(JSON.stringify(v).length);
    const out = r.value as typeof v;
    expect(out.title).toBe('Results');
    expect(out.rows.length).toBeGreaterThan(0);
    expect(out.rows).toEqual(v.rows.slice(0, out.rows.length));
    expect(JSON.stringify(out).length).toBeLessThanOrEqual(2000);
  });

  it('shortens many lists of the same size together, still as JSON rather than cut text', () => {
    // 300 lists of 50 items: emptied they fit in 5,000 characters, but one list a pass would need
    // hundreds more passes than any bound allows, and the output ended as a cut string.
    const v = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`k${i}`, Array.from({ length: 50 }, (_, j) => `value ${j}`)]));
    const r = shorten(v, 5000);
    expect(r.truncated).toBe(true);
    expect(typeof r.value).toBe('object');
    const out = r.value as Record<string, string[]>;
    expect(Object.keys(out)).toEqual(Object.keys(v));
    for (const [k, list] of Object.entries(out)) expect(list).toEqual(v[k]!.slice(0, list.length));
    expect(JSON.stringify(out).length).toBeLessThanOrEqual(5000);
  });

  it('shortens long strings once lists cannot help, and cuts the text only as a last resort', () => {
    const v = { a: 'x'.repeat(10_000), b: 'y'.repeat(10_000) };
    const r = shorten(v, 1000);
    const out = r.value as { a: string; b: string };
    expect(out.a.startsWith('xxx')).toBe(true);
    expect(out.a.endsWith('…')).toBe(true);
    expect(JSON.stringify(out).length).toBeLessThanOrEqual(1000);
    const keys = Object.fromEntries(Array.from({ length: 500 }, (_, i) => [`key${i}`, i]));
    const cut = shorten(keys, 100);
    expect(typeof cut.value).toBe('string');
    expect((cut.value as string).length).toBeLessThanOrEqual(98);
  });

  it('shortens deeply nested lists to valid JSON', () => {
    let v: unknown = ['leaf'];
    for (let i = 0; i < 2000; i++) v = [`a${i}`.repeat(50), v, `b${i}`.repeat(50)];
    const r = shorten(v, 1000);
    expect(r.truncated).toBe(true);
    expect(Array.isArray(r.value)).toBe(true);
    expect(JSON.stringify(r.value).length).toBeLessThanOrEqual(1000);
  });
});
