// The builder's definition format (pure): the template is valid, every kind of mistake gets a
// precise JSON Pointer, performs_actions follows the recipe, and the hash ignores key order.
import { describe, expect, it } from 'vitest';
import { definitionHash, definitionIssues, parseDefinition, performsActions, shareIssues, workflowTemplate } from '../shared/builder/index.ts';

const paths = (json: unknown) => definitionIssues(json).map((i) => i.path);

describe('builder definition', () => {
  it('accepts the template', () => {
    expect(definitionIssues(workflowTemplate())).toEqual([]);
    expect(performsActions(workflowTemplate().operations[0]!)).toBe(false);
  });

  it('points at structural mistakes', () => {
    const d: any = workflowTemplate();
    d.handle = 'no-at';
    d.category = 'nonsense';
    d.extra = 1;
    d.operations[0].examples = [];
    const issues = definitionIssues(d);
    expect(issues.map((i) => i.path)).toEqual(expect.arrayContaining(['/handle', '/category', '/', '/operations/0/examples']));
    expect(issues.find((i) => i.path === '/')!.message).toContain('"extra"');
  });

  it('checks recipes, hosts, schemas, examples and access against each other', () => {
    const d: any = workflowTemplate();
    const op = d.operations[0];
    op.recipe.steps[0].url = 42;
    op.recipe.hosts.push('other.example.test');
    op.examples[0].input = { isbn13: 'nope' };
    op.examples[0].output.price = 'free';
    op.access = [{ kind: 'access_key', name: 'KEY', site: 'unknown.example.test' }];
    op.output_schema.properties.title = { type: 'no-such-type' };
    const p = paths(d);
    expect(p).toEqual(expect.arrayContaining(['/operations/0/recipe/steps/0/url', '/operations/0/access/0/site', '/operations/0/examples/0/input/isbn13', '/operations/0/output_schema']));
    const d2: any = workflowTemplate();
    d2.operations[0].recipe.hosts.push('other.example.test');
    expect(paths(d2)).toEqual(['/operations/0/recipe/hosts/1']);
    const d3: any = workflowTemplate();
    d3.operations[0].examples[0].output.price = 'free';
    expect(paths(d3)).toEqual(['/operations/0/examples/0/output/price']);
    const d4: any = workflowTemplate();
    d4.operations.push(structuredClone(d4.operations[0]));
    expect(paths(d4)).toEqual(['/operations/1/name']);
  });

  it('refuses regular expressions the linear-time engine cannot run, wherever they are, and nesting deeper than it looks', () => {
    const d: any = workflowTemplate();
    d.operations[0].input_schema.properties.note = { type: 'string', pattern: '^(?=a)a+$' };
    d.operations[0].output_schema.patternProperties = { '(x)\\1': {} };
    expect(paths(d)).toEqual(['/operations/0/input_schema/properties/note/pattern', '/operations/0/output_schema/patternProperties/(x)\\1']);
    const deep: any = workflowTemplate();
    let node = deep.operations[0].input_schema;
    for (let i = 0; i < 70; i++) node = node.properties = { x: { type: 'object' } }, node = node.x;
    expect(definitionIssues(deep).some((i) => i.message.includes('nested more than 64 levels'))).toBe(true);
    // Nested thousands deep (10 KB of brackets in a console form): refused as a whole, not a stack overflow.
    const brackets = JSON.parse(`{"handle":"@a","x":${'['.repeat(5_000)}${']'.repeat(5_000)}}`);
    expect(definitionIssues(brackets)).toEqual([{ path: '/', message: 'is nested more than 256 levels deep' }]);
    // The template's own patterns (ISBN, currency) are fine, and editing one copy leaves the next alone.
    expect(definitionIssues(workflowTemplate())).toEqual([]);
  });

  it('runs every pattern in linear time: ones that make a backtracking engine take hours answer at once', () => {
    // ^(\w|\d)*$ on "1"×40 + "!" backtracks 2^40 times in V8's engine; nested quantifiers too.
    const d: any = workflowTemplate();
    d.operations[0].input_schema.properties.isbn13.pattern = '^(\\w|\\d)*$';
    d.operations[0].examples[0].input.isbn13 = `${'1'.repeat(40)}!`;
    const nested: any = workflowTemplate();
    nested.operations[0].input_schema.properties.isbn13.pattern = '^(a+)+$';
    nested.operations[0].examples[0].input.isbn13 = `${'a'.repeat(40)}!`;
    const started = Date.now();
    expect(paths(d)).toEqual(['/operations/0/examples/0/input/isbn13']);
    expect(paths(nested)).toEqual(['/operations/0/examples/0/input/isbn13', '/operations/0/examples/0/output/isbn13']);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('derives performs_actions from action steps; a contradicting declaration is refused', () => {
    const d: any = workflowTemplate();
    d.operations[0].recipe.steps.unshift({ type: 'request', method: 'POST', url: 'http://books.example.test/basket', action: true });
    expect(definitionIssues(d)).toEqual([]);
    expect(performsActions(d.operations[0])).toBe(true);
    d.operations[0].performs_actions = false;
    expect(paths(d)).toEqual(['/operations/0/performs_actions']);
    const unmarked: any = workflowTemplate();
    unmarked.operations[0].recipe.steps.unshift({ type: 'request', method: 'DELETE', url: 'http://books.example.test/basket' });
    expect(paths(unmarked)).toEqual(['/operations/0/recipe/steps/0/action']);
  });

  it('refuses names, labels, titles and descriptions that show as something they are not, as for every name people read', () => {
    const d = workflowTemplate();
    d.name = 'Book prices\u202Eelif.exe';
    d.sites[0]!.name = 'Books\u200B';
    d.operations[0]!.label = 'Price\u0007';
    d.operations[0]!.examples[0]!.title = '\u2066Ferow Finch';
    d.operations[0]!.description = 'Line one\nLine two\u00AD';
    expect(definitionIssues(d)).toEqual([
      { path: '/name', message: 'must not contain control characters or direction overrides' },
      { path: '/sites/0/name', message: 'must not contain invisible characters (zero-width spaces, direction marks, fillers)' },
      { path: '/operations/0/label', message: 'must not contain control characters or direction overrides' },
      { path: '/operations/0/description', message: 'must not contain invisible characters (zero-width spaces, direction marks, fillers)' },
      { path: '/operations/0/examples/0/title', message: 'must not contain control characters or direction overrides' },
    ]);
    // A description may break lines and hold tabs; names in other scripts are names.
    const ok = workflowTemplate();
    ok.description = 'First line\n\tindented';
    ok.name = 'کتاب‌فروشی 書店';
    expect(definitionIssues(ok)).toEqual([]);
  });

  it('refuses a definition over the size bound before looking further', () => {
    const d: any = workflowTemplate();
    d.description = 'x'.repeat(600 * 1024);
    expect(definitionIssues(d)).toEqual([{ path: '/', message: expect.stringMatching(/at most 524288 are accepted$/) }]);
  });

  it('refuses output schemas whose field paths (selectable_fields) would be more than 1000 or 64 KiB, not ones at the bound', () => {
    const withOutput = (output_schema: unknown) => {
      const d: any = workflowTemplate();
      // The example's output stays valid: every added field is optional.
      d.operations[0].output_schema = { ...d.operations[0].output_schema, properties: { ...d.operations[0].output_schema.properties, ...(output_schema as any) } };
      return d;
    };
    const declared = Object.keys(workflowTemplate().operations[0]!.output_schema.properties as object).length;
    const flat = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`f${i}`, { type: 'string' }]));
    expect(definitionIssues(withOutput(flat(1000 - declared)))).toEqual([]);
    expect(definitionIssues(withOutput(flat(1001 - declared)))).toEqual([
      { path: '/operations/0/output_schema', message: 'declares more than 1000 fields (counting every nested one); at most 1000 are accepted' },
    ]);
    // 30 levels of 90-character names: 60 fields, but every path repeats all its parents' names.
    let deep: any = { type: 'string' };
    for (let i = 0; i < 30; i++) deep = { type: 'object', properties: { [`${String(i).padStart(2, '0')}${'n'.repeat(88)}`]: deep, [`leaf${i}`]: { type: 'string' } } };
    const issues = definitionIssues(withOutput({ deep }));
    expect(issues).toEqual([{ path: '/operations/0/output_schema', message: expect.stringMatching(/^has field paths of \d+ characters in all .*; at most 65536 are accepted$/) }]);
  });

  it('sharing needs every recipe host to be a site of the access requirements (callers\' connections stay on their sites)', () => {
    const d: any = workflowTemplate();
    expect(shareIssues(d)).toEqual([]); // no connections: nothing to leak
    d.sites.push({ name: 'Other', host: 'other.example.test' });
    d.operations[0].recipe.hosts.push('other.example.test');
    d.operations[0].access = [{ kind: 'access_key', name: 'BOOKS_KEY', site: 'books.example.test' }];
    expect(definitionIssues(d)).toEqual([]);
    expect(shareIssues(d).map((i) => i.path)).toEqual(['/operations/0/recipe/hosts/1']);
  });

  it('parseDefinition throws invalid_input with details.issues', () => {
    const d: any = workflowTemplate();
    delete d.name;
    let err: any;
    try {
      parseDefinition(d);
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: 'invalid_input', param: 'definition', details: { issues: [{ path: '/', message: expect.stringContaining('"name"') }] } });
  });

  it('hashes the canonical JSON: key order does not matter, content does', () => {
    const a = workflowTemplate();
    const reordered = Object.fromEntries(Object.entries(a).reverse());
    expect(Object.keys(reordered)[0]).not.toBe(Object.keys(a)[0]);
    expect(definitionHash(reordered as typeof a)).toBe(definitionHash(a));
    expect(definitionHash(workflowTemplate('@other'))).not.toBe(definitionHash(a));
  });
});
