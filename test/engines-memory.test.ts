// What a run may hold in memory, through the recipe runner against a real HTTP server on loopback:
// a pagination stops as soon as what it collected passes the bound a value may hold (not after all
// its pages), and parsed pages wait for one of the process's document slots (document-slots.ts),
// giving them back whatever the run's outcome. Plus the pure running count (value-size.ts).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRecipeRunner, type RecipeRunner, type RunContext } from '../activities/engines/index.ts';
import { DOCUMENT_SLOTS, documentSlots } from '../activities/engines/document-slots.ts';
import { BoundedList } from '../activities/engines/value-size.ts';
import { ServiceError } from '../shared/errors.ts';
import { MAX_VALUE_CHARS, MAX_VALUE_NODES, assertBoundedValue } from '../shared/recipes/template.ts';
import type { Recipe } from '../shared/recipes/schema.ts';

const HOST = 'large.example.test';
let server: http.Server;
let runner: RecipeRunner;
let requests = 0;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    requests++;
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname === '/items') {
      // `items` strings of `size` characters, the same on every page
      // (or, with `members`, objects of that many members)
      const members = Number(url.searchParams.get('members') ?? 0);
      const items = Array.from({ length: Number(url.searchParams.get('items')) }, (_, i) =>
        members ? Object.fromEntries(Array.from({ length: members }, (_, k) => [`m${k}`, i])) : `${i} `.padEnd(Number(url.searchParams.get('size')), 'a'),
      );
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ items }));
    }
    res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>Small</title><h1>Small</h1><p>one</p><p>two</p>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  runner = createRecipeRunner({ hostMap: { [HOST]: `127.0.0.1:${(server.address() as AddressInfo).port}` } });
});
afterAll(async () => {
  await runner?.close();
  await new Promise((resolve) => server?.close(resolve));
});

const ctx = (signal = AbortSignal.timeout(60_000), party = 'org_memory'): RunContext => ({ signal, heartbeat() {}, requestRef: 'req_memory_0001', party });

async function outcome(recipe: Recipe, c = ctx()): Promise<{ result?: unknown; error?: ServiceError }> {
  try {
    return { result: await runner.run(recipe, {}, c) };
  } catch (e) {
    if (!(e instanceof ServiceError)) throw e;
    return { error: e };
  }
}

const pagination = (items: number, size: number, extra: Record<string, unknown> = {}, members = 0): Recipe => ({
  engine: 'http',
  hosts: [HOST],
  steps: [
    {
      type: 'paginate',
      limit: 10_000,
      max_pages: 40,
      collect: 'page.items',
      save_as: 'all',
      next: { kind: 'counter' },
      steps: [
        { type: 'request', url: `http://${HOST}/items?items=${items}&size=${size}&members=${members}&page={{vars.page}}`, parse: 'json', save_as: 'raw' },
        { type: 'extract', from: { var: 'raw' }, fields: { items: { type: 'list', pointer: '/items', item: { type: members ? 'json' : 'text' } } }, save_as: 'page' },
      ],
      ...extra,
    },
  ] as Recipe['steps'],
  output: { n: '{{vars.all.length}}' },
});

describe('a pagination within the bound of a value', () => {
  it('stops at the page that takes what it collected past 4 MiB: value_too_large at the pagination, after two requests, not forty', async () => {
    requests = 0;
    // 30 items of 100,000 characters a page (3 MB); the output names only the count, so no end-of-run check would see the list.
    const { error } = await outcome(pagination(30, 100_000));
    expect(error?.code).toBe('workflow_execution_failed');
    expect(error?.details).toEqual({ step: '0', reason: 'value_too_large' });
    expect(error?.message).toBe(`A value the recipe builds is larger than ${MAX_VALUE_NODES} items or ${MAX_VALUE_CHARS / (1024 * 1024)} MiB of text`);
    expect(requests).toBe(2);
  });

  it('many nodes are bounded too (200,000): pages of 1,000 objects of 20 members stop at the tenth; nine are read whole', async () => {
    requests = 0;
    const many = await outcome(pagination(1_000, 0, {}, 20));
    expect(many.error?.details).toEqual({ step: '0', reason: 'value_too_large' });
    expect(requests).toBe(10);
    requests = 0;
    expect(await outcome(pagination(1_000, 0, { max_pages: 9 }, 20))).toEqual({ result: { n: 9_000 } });
    expect(requests).toBe(9);
  });

  it("items past the limit are never kept: a page of 3 MB read for its first 5 items is not refused (cumulative too)", async () => {
    expect(await outcome(pagination(30, 100_000, { limit: 5 }))).toEqual({ result: { n: 5 } });
    expect(await outcome(pagination(30, 100_000, { limit: 5, cumulative: true }))).toEqual({ result: { n: 5 } });
    // 2 pages of 30 items of 60,000 characters, cumulative: each page replaces the list, which stays at 1.8 MB.
    expect(await outcome(pagination(30, 60_000, { max_pages: 3, cumulative: true }))).toEqual({ result: { n: 30 } });
  });
});

describe('document slots', () => {
  const read: Recipe = {
    engine: 'http',
    hosts: [HOST],
    steps: [
      { type: 'navigate', url: `http://${HOST}/` },
      { type: 'extract', fields: { h: { type: 'text', selector: 'h1' }, n: { type: 'count', selector: 'p' } }, save_as: 'r' },
      { type: 'request', url: `http://${HOST}/`, parse: 'html', save_as: 'again' },
      { type: 'not_found', when: { selector_present: 'p.missing' } },
    ],
    output: { h: '{{vars.r.h}}', n: '{{vars.r.n}}' },
  };

  it('a run gives its slot back whatever its outcome, so runs after it are never short of one', async () => {
    for (let i = 0; i < DOCUMENT_SLOTS + 2; i++) {
      expect(await outcome(read)).toEqual({ result: { h: 'Small', n: 2 } });
      expect((await outcome({ ...read, steps: [...read.steps, { type: 'extract', fields: { x: { type: 'text', selector: 'p:bad(' } }, save_as: 'x' }] })).error?.code).toBe('workflow_execution_failed');
    }
    expect(documentSlots().inUse).toBe(0);
  });

  it('a run waits for a slot while others hold every one, gives up at its deadline, and runs once one is free', async () => {
    const held = await Promise.all(Array.from({ length: DOCUMENT_SLOTS }, () => documentSlots().acquire(AbortSignal.timeout(60_000), 'org_other')));
    try {
      const started = performance.now();
      const { error } = await outcome(read, ctx(AbortSignal.timeout(500)));
      expect(error?.code).toBe('execution_timeout');
      expect(performance.now() - started).toBeLessThan(5_000);
      const waiting = outcome(read);
      await new Promise((r) => setTimeout(r, 200));
      held.pop()!();
      expect(await waiting).toEqual({ result: { h: 'Small', n: 2 } });
    } finally {
      for (const release of held) release();
    }
    expect(documentSlots().inUse).toBe(0);
  });
});

describe('BoundedList counts as assertBoundedValue does', () => {
  it('refuses exactly when the whole list would be refused, with the same error', () => {
    const cases: unknown[][] = [
      Array.from({ length: MAX_VALUE_NODES }, () => 0),
      Array.from({ length: MAX_VALUE_NODES + 1 }, () => 0),
      [{ a: 'x'.repeat(MAX_VALUE_CHARS - 1) }],
      [{ ab: 'x'.repeat(MAX_VALUE_CHARS - 1) }],
      [[1, 2, [3, { k: ['y'.repeat(10)] }]], 'z'.repeat(MAX_VALUE_CHARS - 13)],
      [[1, 2, [3, { k: ['y'.repeat(10)] }]], 'z'.repeat(MAX_VALUE_CHARS - 10)],
      Array.from({ length: 100_000 }, () => ({ a: 1 })),
      Array.from({ length: 100_001 }, () => ({ a: 1 })),
    ];
    for (const items of cases) {
      let whole: unknown;
      try {
        assertBoundedValue(items);
      } catch (e) {
        whole = e;
      }
      let running: unknown;
      const list = new BoundedList([]);
      try {
        for (const item of items) list.add(item);
      } catch (e) {
        running = e;
      }
      expect(running === undefined, `${items.length} items`).toBe(whole === undefined);
      if (whole) expect(running).toMatchObject({ code: 'workflow_execution_failed', message: (whole as Error).message, details: { reason: 'value_too_large' } });
    }
  });
});
