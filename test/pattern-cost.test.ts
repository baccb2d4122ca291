// A pattern runs in linear time, but linear in (characters × instructions of its compiled program):
// `(?:a?){1000}a{1000}[^a]`, 22 characters, compiles to 3,003 instructions and held a thread for
// seconds per 20,000 characters. Such a pattern is refused when a workflow is built; every match is
// charged its cost before it runs: an extraction against its document's work budget (the run fails
// instead of stalling), a JSON Schema check against one budget per value (the API refuses the input
// at once, a string too long to check named at its path).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRecipeRunner, type RecipeRunner } from '../activities/engines/index.ts';
import { WORK_PER_DOCUMENT } from '../activities/engines/extract.ts';
import { workflowTemplate } from '../shared/builder/index.ts';
import { publishApi } from '../shared/db/catalog.ts';
import { ServiceError } from '../shared/errors.ts';
import { HOST_NAME_PATTERN } from '../shared/host-name.ts';
import { compileOrgSchema } from '../shared/org-schemas.ts';
import type { Recipe } from '../shared/recipes/schema.ts';
import { MAX_PATTERN_INSTRUCTIONS, PATTERN_WORK_PER_VALUE, compileLinear, matchCost, patternCost, patternProblem } from '../shared/regex.ts';
import { balanceOf, closeDb, db, ledgerOf, newOrg, query } from './helpers/stack.ts';
import { signedIn } from './helpers/console-http.ts';

const HUGE = '(?:a?){1000}a{1000}[^a]'; // 3,003 instructions
const COSTLY = '(?:a?){100}a{100}[^a]'; // 303 instructions: accepted, but 6 million steps over 20,000 characters

afterAll(closeDb);

describe('the cost of a pattern (pure)', () => {
  it('is characters (and the end of the text) × instructions', () => {
    expect(patternCost(303, 0)).toBe(303);
    expect(patternCost(303, 20_000)).toBe(303 * 20_001);
    expect(compileLinear(COSTLY).programSize()).toBe(303);
    expect(matchCost(COSTLY, 'a'.repeat(20_000))).toBe(303 * 20_001);
    expect(matchCost('^x', '')).toBe(compileLinear('^x').programSize());
  });

  it('refuses a program over the bound with its size, and leaves every pattern the service and its demo sites use far below it', () => {
    expect(patternProblem(HUGE)).toBe(
      `compiles to 3003 instructions, more than the ${MAX_PATTERN_INSTRUCTIONS} a pattern may have (matching costs each character of text a step per instruction): write large counted repetitions such as {0,500} as * or +, or with smaller counts`,
    );
    expect(patternProblem('.{0,1000}')).toMatch(/^compiles to 2002 instructions/);
    expect(patternProblem('^(?=a)a+$')).toMatch(/^not a regular expression this service can run in linear time/);
    for (const p of [HOST_NAME_PATTERN, '^[a-z][a-z0-9_]{0,99}$', '^@[a-z0-9][a-z0-9_-]{0,99}$', '^[A-Za-z0-9_-]{1,100}$', '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}$', '^97[89][0-9]{10}$', COSTLY]) {
      expect(patternProblem(p), p).toBeNull();
      expect(compileLinear(p).programSize() * 3, p).toBeLessThan(MAX_PATTERN_INSTRUCTIONS);
    }
  });

  it('a schema check refuses a string too long to check at its path, without running it; shorter ones are matched as before', () => {
    const validate = compileOrgSchema({ type: 'object', properties: { note: { type: 'string', pattern: HUGE }, code: { type: 'string', pattern: '^[A-Z]{2}$' } } });
    const most = Math.floor(PATTERN_WORK_PER_VALUE / 3003) - 1; // 1,331 characters
    // Matched as before while the value's budget lasts (the code's pattern takes a little of it too).
    expect(validate({ note: `${'a'.repeat(most - 10)}b`, code: 'GB' })).toBe(true);
    expect(validate({ note: 'a'.repeat(most - 10), code: 'GB' })).toBe(false);
    expect(validate.errors!.map((e) => [e.instancePath, e.message])).toEqual([['/note', `must match pattern "${HUGE}"`]]);
    // 100,000 characters took this pattern 18 s; refused without being run.
    const started = performance.now();
    expect(validate({ note: 'a'.repeat(100_000), code: 'gb' })).toBe(false);
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(validate.errors!.map((e) => [e.instancePath, e.keyword, e.message])).toEqual([
      ['/note', 'pattern', `is too long to check against pattern "${HUGE}": 100000 characters, and this pattern (3003 instructions) is checked on at most ${most}`],
      ['/code', 'pattern', 'must match pattern "^[A-Z]{2}$"'],
    ]);
  });

  it('one budget for the whole value: many strings each under it are refused once together they are over', () => {
    const validate = compileOrgSchema({ type: 'array', items: { type: 'string', pattern: HUGE } });
    const item = `${'a'.repeat(1000)}b`; // matches; 3 million steps each: the second goes over
    const started = performance.now();
    expect(validate(Array.from({ length: 100 }, () => item))).toBe(false);
    expect(performance.now() - started).toBeLessThan(3_000); // unbounded: 100 × 3 million steps, ten seconds or more
    expect(validate.errors!.length).toBeGreaterThan(1);
    expect(validate.errors![0]!.instancePath).toBe('/1');
    expect(validate.errors![0]!.params.tooLongToCheck).toBe(true);
    expect(validate.errors![0]!.message).toMatch(/the strings checked before it in this value used the rest of the 4000000 steps/);
    expect(validate([item])).toBe(true); // a new value, a new budget
  });

  it('a refusal no error stands for still fails the value: under `not`, and a property name under patternProperties', () => {
    const not = compileOrgSchema({ type: 'string', not: { pattern: HUGE } });
    expect(not('a'.repeat(2_000))).toBe(false);
    expect(not.errors!.map((e) => [e.instancePath, e.message])).toEqual([
      ['', `holds a string or property name too long to check against pattern "${HUGE}": 2000 characters, and this pattern (3003 instructions) is checked on at most 1331`],
    ]);
    expect(not('b')).toBe(true);
    const keys = compileOrgSchema({ type: 'object', patternProperties: { [HUGE]: { type: 'integer' } } });
    expect(keys({ ['a'.repeat(5_000)]: 'not checked' })).toBe(false);
    expect(keys.errors!.at(-1)!.params.tooLongToCheck).toBe(true);
    expect(keys({ ['a'.repeat(50)]: 'x' })).toBe(true);
  });
});

describe('through the stack', () => {
  it('a workflow whose schema or recipe field has a pattern too large is refused when built, each at its path', async () => {
    const owner = await signedIn('owner');
    const def: any = workflowTemplate(`@pattern-${Math.random().toString(36).slice(2, 8)}`);
    def.operations[0].input_schema.properties.isbn13.pattern = HUGE;
    const fields = def.operations[0].recipe.steps.find((s: { type: string }) => s.type === 'extract').fields;
    const [name] = Object.keys(fields);
    fields[name].pattern = '[0-9]{0,600}';
    const size = compileLinear('[0-9]{0,600}').programSize();
    expect(size).toBeGreaterThan(MAX_PATTERN_INSTRUCTIONS);
    const res = await owner.client.submit('/console/workflows/build', '/console/workflows/build', { definition: JSON.stringify(def), action: 'check' });
    expect(res.status, res.text.slice(0, 500)).toBe(400);
    expect(res.text).toContain('/operations/0/input_schema/properties/isbn13/pattern');
    expect(res.text).toContain('compiles to 3003 instructions, more than the 1000 a pattern may have');
    expect(res.text).toMatch(new RegExp(`/operations/0/recipe/steps/\\d+/fields/${name}/pattern`));
    expect(res.text).toContain(`compiles to ${size} instructions`);
    expect(await ledgerOf(owner.org.org_id)).toEqual([]);
  });

  it('an input too long to check against its pattern is invalid_provider_input at once, naming the field (a workflow published before the bound)', async () => {
    const owner = await newOrg(5);
    const handle = `@costly-${Math.random().toString(36).slice(2, 8)}`;
    await publishApi(
      db(),
      {
        handle,
        name: 'Costly',
        description: '',
        category: 'other',
        website_url: null,
        sites: [],
        operations: [
          {
            name: 'op',
            label: 'Op',
            description: '',
            cost_credits: 1,
            default_version: 1,
            versions: [{ version: 1, input_schema: { type: 'object', properties: { note: { type: 'string', pattern: HUGE } } }, output_schema: {}, examples: [], recipe: {} }],
          },
        ],
      },
      { ownerOrgId: owner.org_id },
    );
    const started = performance.now();
    const res = await query(owner.api_key, { api: handle, operation: 'op', input: { note: 'a'.repeat(40_000) } });
    const ms = performance.now() - started;
    expect(res.status, JSON.stringify(res.body).slice(0, 500)).toBe(422);
    expect(res.body.error.code).toBe('invalid_provider_input');
    expect(res.body.error.param).toBe('input.note');
    expect(res.body.error.details.issues).toEqual([
      { path: 'input.note', code: 'pattern', message: `is too long to check against pattern "${HUGE}": 40000 characters, and this pattern (3003 instructions) is checked on at most 1331` },
    ]);
    expect(ms).toBeLessThan(3_000); // unbounded: 7 s or more of the API's thread
    expect(await ledgerOf(owner.org_id)).toEqual([]);
  });
});

describe('extraction charges its patterns to the document', () => {
  const HOST = 'costly-pattern.example.test';
  const ITEMS = 12;
  let server: http.Server;
  let runner: RecipeRunner;
  beforeAll(async () => {
    server = http.createServer((req, res) => {
      if (req.url === '/list') return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ items: Array.from({ length: ITEMS }, () => 'a'.repeat(20_000)) }));
      if (req.url === '/html') return void res.writeHead(200, { 'content-type': 'text/html' }).end(`<html><body><ul>${`<li>${'a'.repeat(20_000)}</li>`.repeat(ITEMS)}</ul></body></html>`);
      if (req.url === '/short') return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ items: Array.from({ length: ITEMS }, () => `${'a'.repeat(100)}b`) }));
      res.writeHead(404).end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    runner = createRecipeRunner({ hostMap: { [HOST]: `127.0.0.1:${(server.address() as AddressInfo).port}` } });
  });
  afterAll(async () => {
    await runner?.close();
    await new Promise((r) => server?.close(r));
  });

  /** The run's outcome and the longest the thread was held meanwhile (logged: on a loaded machine it is no measure). */
  async function timed(recipe: Recipe) {
    let last = performance.now();
    let stallMs = 0;
    const tick = setInterval(() => {
      const n = performance.now();
      stallMs = Math.max(stallMs, n - last);
      last = n;
    }, 10);
    let out: unknown;
    try {
      out = await runner.run(recipe, {}, { signal: AbortSignal.timeout(30_000), heartbeat() {}, requestRef: 'req_pattern', party: 'org_pattern' });
    } catch (e) {
      out = e instanceof ServiceError ? { code: e.code, message: e.message } : String(e);
    } finally {
      stallMs = Math.max(stallMs, performance.now() - last);
      clearInterval(tick);
    }
    console.log(`pattern extraction held the thread ${Math.round(stallMs)} ms at most`);
    return { out, stallMs };
  }

  const failure = {
    code: 'workflow_execution_failed',
    message: `The website's page could not be read: matching the pattern "${COSTLY}" against 20,000 characters needs more work than a document may take (${WORK_PER_DOCUMENT.toLocaleString('en')} steps a document, with its selectors' and reads'): each character costs a step per instruction of the pattern (303)`,
  };

  it('a JSON list: the item that goes over the budget fails the run', async () => {
    const r = await timed({
      engine: 'http',
      hosts: [HOST],
      timeout_ms: 30_000,
      steps: [
        { type: 'request', url: `http://${HOST}/list`, parse: 'json', save_as: 'raw' },
        { type: 'extract', from: { var: 'raw' }, fields: { xs: { type: 'list', pointer: '/items', item: { type: 'text', pattern: COSTLY } } }, save_as: 'p' },
      ],
      output: { xs: '{{vars.p.xs}}' },
    } as Recipe);
    expect(r.out).toEqual(failure);
  });

  it('an HTML list: the pattern shares the page budget with its selectors and reads', async () => {
    const r = await timed({
      engine: 'http',
      hosts: [HOST],
      timeout_ms: 30_000,
      steps: [
        { type: 'request', url: `http://${HOST}/html`, parse: 'html', save_as: 'raw' },
        { type: 'extract', fields: { xs: { type: 'list', selector: 'li', item: { type: 'text', pattern: COSTLY } } }, save_as: 'p' },
      ],
      output: { xs: '{{vars.p.xs}}' },
    } as Recipe);
    expect(r.out).toEqual(failure);
  });

  it('the same pattern over short items is within the budget and extracts as before', async () => {
    const r = await timed({
      engine: 'http',
      hosts: [HOST],
      timeout_ms: 30_000,
      steps: [
        { type: 'request', url: `http://${HOST}/short`, parse: 'json', save_as: 'raw' },
        { type: 'extract', from: { var: 'raw' }, fields: { xs: { type: 'list', pointer: '/items', item: { type: 'text', pattern: `(${COSTLY})` } } }, save_as: 'p' },
      ],
      output: { xs: '{{vars.p.xs}}' },
    } as Recipe);
    expect(r.out).toEqual({ xs: Array.from({ length: ITEMS }, () => `${'a'.repeat(100)}b`) });
  });
});

describe('output schemas', () => {
  it("a workflow's output too long to check against its output schema's pattern fails the run with a message that says so, charging nothing", async () => {
    const owner = await newOrg(5);
    const handle = `@costly-out-${Math.random().toString(36).slice(2, 8)}`;
    const recipe = structuredClone(workflowTemplate().operations[0]!.recipe) as { steps: Array<Record<string, unknown>>; output: unknown };
    const extract = recipe.steps.find((s) => s.type === 'extract')!;
    delete extract.scope;
    extract.fields = { page: { type: 'html', selector: 'body' } };
    recipe.output = '{{vars.book}}';
    await publishApi(
      db(),
      {
        handle,
        name: 'Costly output',
        description: '',
        category: 'other',
        website_url: null,
        sites: [{ name: 'Books', host: 'books.example.test' }],
        operations: [
          {
            name: 'op',
            label: 'Op',
            description: '',
            cost_credits: 1,
            default_version: 1,
            versions: [
              {
                version: 1,
                input_schema: { type: 'object', properties: { isbn13: { type: 'string' } } },
                output_schema: { type: 'object', properties: { page: { type: 'string', pattern: HUGE } } },
                examples: [],
                recipe,
              },
            ],
          },
        ],
      },
      { ownerOrgId: owner.org_id },
    );
    const res = await query(owner.api_key, { api: handle, operation: 'op', input: { isbn13: '9782918455943' } });
    expect(res.status, JSON.stringify(res.body).slice(0, 800)).toBe(500);
    expect(res.body.error.code).toBe('internal_error');
    expect(res.body.error.message).toMatch(
      new RegExp(`^The workflow's output could not be checked against its output schema: /page is too long to check against pattern "\\(\\?:a\\?\\)\\{1000\\}a\\{1000\\}\\[\\^a\\]": \\d+ characters, and this pattern \\(3003 instructions\\) is checked on at most 1331$`),
    );
    expect(res.body.error.receipt?.billing?.status).toBe('released');
    expect(await balanceOf(owner.org_id)).toEqual({ granted: 5, available: 5, reserved: 0, charged: 0 });
  });
});
