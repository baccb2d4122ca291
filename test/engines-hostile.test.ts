// The HTTP engine against a hostile website: a real HTTP server on loopback (mapped as
// hostile.example.test) that answers with pathological documents. What is asserted is what a caller
// and every other organization on the worker see: the run's code and details, and that the
// worker's one thread was never blocked for long (every organization's runs share it).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRecipeRunner, type RecipeRunner, type RunContext } from '../activities/engines/index.ts';
import { ServiceError } from '../shared/errors.ts';
import type { Recipe } from '../shared/recipes/schema.ts';

const HOST = 'hostile.example.test';
let server: http.Server;
let runner: RecipeRunner;

/** Documents the server answers with, by path. */
const pages: Record<string, () => string> = {
  // 30,000 nested elements (150 KB)
  '/nested': () => `<html><body>${'<div>'.repeat(30_000)}<p class="x">deep</p></body></html>`,
  // one tag with 40,000 attributes (270 KB)
  '/attributes': () => `<html><body><p class="x" ${Array.from({ length: 40_000 }, (_, i) => `a${i}`).join(' ')}>wide</p></body></html>`,
  // a 200 KB title repeating a challenge word, never closed
  '/title': () => `<html><body><p class="x">words</p><title>${'captcha '.repeat(25_000)}`,
  // a real page near the bounds: 400 levels deep, an element with 200 attributes
  '/busy': () =>
    `<html><body>${'<div>'.repeat(400)}<p class="x" ${Array.from({ length: 200 }, (_, i) => `data-a${i}="v${i}"`).join(' ')}>fine</p>${'</div>'.repeat(400)}</body></html>`,
};

const ctx = (): RunContext => ({ signal: AbortSignal.timeout(60_000), heartbeat() {}, requestRef: 'req_hostile_0001', party: 'org_hostile' });

const page = (path: string): Recipe => ({
  engine: 'http',
  hosts: [HOST],
  steps: [
    { type: 'request', url: `http://${HOST}${path}`, parse: 'html', save_as: 'raw' },
    { type: 'extract', fields: { text: { type: 'text', selector: 'p.x' } }, save_as: 'p' },
  ],
  output: { text: '{{vars.p.text}}' },
});

/** Runs a recipe while a timer measures the longest the thread went without running it. */
async function timed(recipe: Recipe): Promise<{ result?: unknown; error?: ServiceError; stallMs: number }> {
  let last = performance.now();
  let stallMs = 0;
  const gap = () => {
    const now = performance.now();
    stallMs = Math.max(stallMs, now - last);
    last = now;
  };
  const tick = setInterval(gap, 20);
  let outcome: { result?: unknown; error?: ServiceError };
  try {
    outcome = { result: await runner.run(recipe, {}, ctx()) };
  } catch (e) {
    if (!(e instanceof ServiceError)) throw e;
    outcome = { error: e };
  } finally {
    gap(); // the run may end right after a long synchronous stretch, before the timer runs again
    clearInterval(tick);
  }
  return { ...outcome, stallMs };
}

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const make = pages[req.url ?? ''];
    if (!make) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(make());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  runner = createRecipeRunner({ hostMap: { [HOST]: `127.0.0.1:${(server.address() as AddressInfo).port}` } });
});
afterAll(async () => {
  await runner?.close();
  await new Promise((resolve) => server?.close(resolve));
});

describe('pathological HTML never blocks the worker', () => {
  it('a page nested 30,000 deep is refused as document_too_complex at once', async () => {
    const { error, stallMs } = await timed(page('/nested'));
    expect(error?.code).toBe('upstream_http_error');
    expect(error?.details).toMatchObject({ reason: 'document_too_complex', step: '1' });
    expect(error?.message).toMatch(/nested more than 512 deep/);
    expect(stallMs).toBeLessThan(1_000);
  });

  it('a tag with 40,000 attributes is refused as document_too_complex at once', async () => {
    const { error, stallMs } = await timed(page('/attributes'));
    expect(error?.code).toBe('upstream_http_error');
    expect(error?.details).toMatchObject({ reason: 'document_too_complex', step: '1' });
    expect(error?.message).toMatch(/more than 256 attributes/);
    expect(stallMs).toBeLessThan(1_000);
  });

  it('a huge unclosed title of challenge words is read at once (and is not a challenge)', async () => {
    const { result, error, stallMs } = await timed(page('/title'));
    expect(error).toBeUndefined();
    expect(result).toEqual({ text: 'words' });
    expect(stallMs).toBeLessThan(1_000);
  });

  it('a deep and attribute-heavy page within the bounds is read as before', async () => {
    const { result, error } = await timed(page('/busy'));
    expect(error).toBeUndefined();
    expect(result).toEqual({ text: 'fine' });
  });
});
