// A publisher's `pattern` meets a caller's prompt tokens in the router's slot filling, on the API's
// one thread. RE2 is linear, but in characters x the compiled program's instructions: each match is
// charged to the fill's budget before it runs (shared/router/fill.ts fillPattern), so a costly
// pattern against many long tokens stops the fill (nothing guessed, the field missing) instead of
// holding the thread; a pattern past the size builds refuse fills nothing. Pure: no stack.
import { describe, expect, it } from 'vitest';
import { readPrompt } from '../shared/router/prompt-facts.ts';
import { fillDetailed } from '../shared/router/fill.ts';
import { MAX_PATTERN_INSTRUCTIONS, compileLinear } from '../shared/regex.ts';

const schemaWith = (pattern: string) => ({ type: 'object', required: ['order_id'], properties: { order_id: { type: 'string', pattern, description: 'order id' } } }) as never;

describe("the router's pattern filling is charged", () => {
  it('a costly pattern against 45 long tokens spends the budget and fills nothing, rather than matching them all', () => {
    const pattern = '^(?:a?){330}a{330}[^a]$'; // 995 instructions: under the bound, each match ~1 ms
    expect(compileLinear(pattern).programSize()).toBeLessThanOrEqual(MAX_PATTERN_INSTRUCTIONS);
    const prompt = 'Find order ' + Array.from({ length: 45 }, (_, i) => 'a'.repeat(198) + '-' + (i % 10)).join(' ');
    const r = fillDetailed(schemaWith(pattern), readPrompt(prompt), new Set());
    expect(r.exhausted).toBe(true);
    expect(r.input).toEqual({});
    expect(r.missing.map((m) => m.field)).toEqual(['/order_id']);
  });

  it('a pattern compiling past the bound (published before it) fills nothing, and costs no budget', () => {
    const pattern = '^(?:[a-z0-9]-?){0,600}$';
    expect(compileLinear(pattern).programSize()).toBeGreaterThan(MAX_PATTERN_INSTRUCTIONS);
    const r = fillDetailed(schemaWith(pattern), readPrompt('Status of order ab1-cd2'), new Set());
    expect(r.input).toEqual({});
    expect(r.exhausted).toBe(false);
  });

  it('an ordinary pattern still fills from a short prompt', () => {
    const r = fillDetailed(schemaWith('^[A-Z]{2}-[0-9]{4,8}$'), readPrompt('Where is my order ab-12345?'), new Set());
    expect(r.input).toEqual({ order_id: 'AB-12345' });
    expect(r.exhausted).toBe(false);
  });
});
