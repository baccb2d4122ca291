// The HTTP engine against the demo sites: every example of every http demo operation, the
// mapping of website failures to catalog codes, host and address refusal, URL-encoding of inputs,
// secrets handling and action semantics.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { PROBE_ONLY_HOST, startDemoSites, type DemoSites } from '../apps/demo-sites/server.ts';
import { createRecipeRunner, type RecipeRunner, type RunContext } from '../activities/engines/index.ts';
import { demoCatalog } from '../shared/catalog/demo/index.ts';
import { parseRecipe, type Recipe } from '../shared/recipes/schema.ts';
import { ServiceError } from '../shared/errors.ts';
import { isFinalRefusal } from '../activities/engines/errors.ts';
import { detectChallenge } from '../activities/engines/interpreter.ts';
import { COOKIE_LIMITS, HttpCookies } from '../activities/engines/http-engine.ts';

let sites: DemoSites;
let runner: RecipeRunner;

const ctx = (extra: Partial<RunContext> = {}): RunContext => ({ signal: new AbortController().signal, heartbeat() {}, requestRef: 'req_test_0001', ...extra });

async function demo(path: string, body?: unknown): Promise<unknown> {
  const res = await fetch(`${sites.origin}${path}`, body === undefined ? undefined : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return res.json();
}

async function runError(recipe: Recipe, input: Record<string, unknown> = {}, c: RunContext = ctx(), r: RecipeRunner = runner): Promise<ServiceError> {
  try {
    await r.run(recipe, input, c);
  } catch (e) {
    expect(e).toBeInstanceOf(ServiceError);
    return e as ServiceError;
  }
  throw new Error('expected the run to fail');
}

beforeAll(async () => {
  sites = await startDemoSites();
  runner = createRecipeRunner({ hostMap: sites.hostMap });
});
afterAll(async () => {
  await runner?.close();
  await sites?.close();
});
beforeEach(async () => {
  await demo('/__demo/reset', {});
});

const ajv = new Ajv2020({ allErrors: true, strict: true });
(addFormats as unknown as (a: Ajv2020) => void)(ajv);

describe('demo catalog on the http engine', () => {
  const cases = demoCatalog.flatMap((api) =>
    api.operations.flatMap((op) =>
      op.versions
        .filter((v) => (v.recipe as Recipe).engine === 'http')
        .flatMap((v) => v.examples.map((ex, i) => ({ name: `${api.handle} ${op.name} v${v.version} #${i + 1} ${ex.title ?? ''}`, api, op, v, ex }))),
    ),
  );

  it('has examples to run', () => {
    expect(cases.length).toBeGreaterThanOrEqual(20);
  });

  it('meets the catalog targets', () => {
    const ops = demoCatalog.flatMap((a) => a.operations.map((o) => ({ a, o })));
    const engines = (o: (typeof ops)[number]['o']) => o.versions.map((v) => (v.recipe as Recipe).engine);
    expect(demoCatalog.length).toBeGreaterThanOrEqual(8);
    expect(new Set(demoCatalog.map((a) => a.category)).size).toBeGreaterThanOrEqual(6);
    expect(ops.length).toBeGreaterThanOrEqual(16);
    expect(ops.filter(({ o }) => engines(o).includes('browser')).length).toBeGreaterThanOrEqual(4);
    expect(ops.filter(({ o }) => o.performs_actions).length).toBeGreaterThanOrEqual(2);
    expect(ops.filter(({ o }) => (o.access ?? []).length > 0).length).toBeGreaterThanOrEqual(2);
    for (const { a, o } of ops) {
      expect(o.cost_credits, `${a.handle} ${o.name}`).toBe(1);
      expect(o.versions.find((v) => v.version === o.default_version), `${a.handle} ${o.name} default`).toBeTruthy();
      for (const v of o.versions) {
        expect(v.examples.length, `${a.handle} ${o.name} v${v.version} examples`).toBeGreaterThanOrEqual(2);
        const recipe = parseRecipe(v.recipe);
        expect(recipe.steps.some((s) => s.action === true), `${a.handle} ${o.name} action steps`).toBe(o.performs_actions === true);
        const secrets = recipe.secrets ?? [];
        expect(secrets.length > 0, `${a.handle} ${o.name} secrets vs access`).toBe((o.access ?? []).length > 0);
        ajv.compile(v.input_schema);
        ajv.compile(v.output_schema);
        expect(v.input_schema.additionalProperties).toBe(false);
      }
    }
    const versioned = ops.filter(({ o }) => o.versions.length > 1);
    expect(versioned.some(({ o }) => o.default_version < Math.max(...o.versions.map((v) => v.version)))).toBe(true);
  });

  it.each(cases)('$name', async ({ op, v, ex }) => {
    const recipe = parseRecipe(v.recipe);
    expect(ajv.validate(v.input_schema, ex.input), JSON.stringify(ajv.errors)).toBe(true);
    const secrets = op.access?.length ? testSecrets : undefined;
    const out = await runner.run(recipe, ex.input, ctx({ secrets }));
    expect(out).toEqual(ex.output);
    expect(ajv.validate(v.output_schema, out), JSON.stringify(ajv.errors)).toBe(true);
  });
});

/** The demo sites' test credentials, as the organization's connections would supply them. */
export const testSecrets: Record<string, string> = { WEATHER_API_KEY: 'wk_demo_valid_key_123', SHOP_EMAIL: 'demo@shop.example.test', SHOP_PASSWORD: 'correct-horse' };

const booksPage = (path: string, extra: Partial<Recipe> = {}): Recipe => ({
  engine: 'http',
  hosts: ['books.example.test'],
  steps: [{ type: 'navigate', url: `http://books.example.test${path}` }],
  output: { ok: true },
  ...extra,
});

describe('website failures map to catalog codes', () => {
  it('404 is upstream_not_found; with not_found_status it is not_found', async () => {
    const e = await runError(booksPage('/books/9780000000000'));
    expect(e.code).toBe('upstream_not_found');
    expect(e.details).toMatchObject({ upstream_status: 404, host: 'books.example.test' });
    const getBook = demoCatalog.find((a) => a.handle === '@books')!.operations.find((o) => o.name === 'get_book')!;
    const e2 = await runError(getBook.versions[0]!.recipe as Recipe, { isbn13: '9780000000000' });
    expect(e2.code).toBe('not_found');
  });

  it('429 is source_rate_limited and carries Retry-After', async () => {
    await demo('/__demo/faults', { host: 'books.example.test', path_prefix: '/search', status: 429, retry_after_s: 7 });
    const e = await runError(booksPage('/search?q=x'));
    expect(e.code).toBe('source_rate_limited');
    expect(e.details).toMatchObject({ upstream_status: 429, retry_after_seconds: 7 });
  });

  it('the weather API rate limit is source_rate_limited', async () => {
    const recipe: Recipe = {
      engine: 'http',
      hosts: ['weather.example.test'],
      steps: [{ type: 'request', url: 'http://weather.example.test/api/v1/alerts?region=england', parse: 'json', save_as: 'a' }],
      output: '{{vars.a.region}}',
    };
    let err: ServiceError | undefined;
    for (let i = 0; i < 8 && !err; i++) {
      try {
        await runner.run(recipe, {}, ctx());
      } catch (e) {
        err = e as ServiceError;
      }
    }
    expect(err?.code).toBe('source_rate_limited');
    expect((err?.details as { retry_after_seconds?: number }).retry_after_seconds).toBeGreaterThanOrEqual(1);
  });

  it('503 and 500 are upstream_http_error; 403 is source_blocked', async () => {
    await demo('/__demo/faults', { host: 'books.example.test', path_prefix: '/a', status: 503 });
    await demo('/__demo/faults', { host: 'books.example.test', path_prefix: '/b', status: 500 });
    await demo('/__demo/faults', { host: 'books.example.test', path_prefix: '/c', status: 403 });
    expect((await runError(booksPage('/a'))).code).toBe('upstream_http_error');
    expect((await runError(booksPage('/b'))).code).toBe('upstream_http_error');
    expect((await runError(booksPage('/c'))).code).toBe('source_blocked');
  });

  it('a bot challenge page is source_blocked', () => {
    expect(() => detectChallenge('<html><head><title>Just a moment...</title></head></html>', 'books.example.test', '0')).toThrow(
      expect.objectContaining({ code: 'source_blocked' }),
    );
    expect(() => detectChallenge('<html><head><title>Books</title></head></html>', 'books.example.test', '0')).not.toThrow();
  });

  it('an unreachable site is workflow_execution_failed', async () => {
    const closed = createRecipeRunner({ hostMap: { 'books.example.test': '127.0.0.1:1' } });
    try {
      const e = await runError(booksPage('/'), {}, ctx(), closed);
      expect(e.code).toBe('workflow_execution_failed');
      expect(e.message).toContain('could not be reached');
    } finally {
      await closed.close();
    }
  });

  it('an abort is execution_timeout', async () => {
    await demo('/__demo/faults', { host: 'books.example.test', path_prefix: '/slow', latency_ms: 3000 });
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 100);
    const started = Date.now();
    const e = await runError(booksPage('/slow'), {}, ctx({ signal: ac.signal }));
    expect(e.code).toBe('execution_timeout');
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it("the recipe's own timeout_ms is execution_timeout", async () => {
    await demo('/__demo/faults', { host: 'books.example.test', path_prefix: '/slow', latency_ms: 3000 });
    const e = await runError(booksPage('/slow', { timeout_ms: 1000 }));
    expect(e.code).toBe('execution_timeout');
  });
});

describe('destinations', () => {
  it('refuses a host the recipe does not declare, also from a URL in a variable', async () => {
    const recipe: Recipe = { engine: 'http', hosts: ['books.example.test'], steps: [{ type: 'navigate', url: '{{input.url}}' }], output: null };
    const e = await runError(recipe, { url: 'http://weather.example.test/api/v1' });
    expect(e.code).toBe('workflow_execution_failed');
    expect(e.details).toMatchObject({ reason: 'host_not_allowed', host: 'weather.example.test' });
    const e2 = await runError(recipe, { url: 'file:///etc/passwd' });
    expect(e2.details).toMatchObject({ reason: 'scheme_not_allowed' });
  });

  it("refuses the ports browsers refuse (the Fetch standard's bad ports: mail, SSH, …) on a declared host, and reaches others", async () => {
    const recipe: Recipe = { engine: 'http', hosts: ['books.example.test'], steps: [{ type: 'request', method: 'POST', url: '{{input.url}}', form: { helo: 'x' }, action: true }], output: null };
    for (const port of [25, 22, 6667]) {
      const e = await runError(recipe, { url: `http://books.example.test:${port}/` });
      expect(e.code).toBe('workflow_execution_failed');
      expect(e.details).toMatchObject({ reason: 'port_not_allowed', port, host: 'books.example.test' });
    }
    // A redirect there is refused the same way.
    const hop: Recipe = { engine: 'http', hosts: ['books.example.test'], steps: [{ type: 'navigate', url: 'http://books.example.test/__probe/redirect?to=http%3A%2F%2Fbooks.example.test%3A25%2F' }], output: null };
    expect((await runError(hop)).details).toMatchObject({ reason: 'port_not_allowed', port: 25 });
    // Another port of the host is its own business (the demo sites answer on any).
    const page: Recipe = { engine: 'http', hosts: ['books.example.test'], steps: [{ type: 'navigate', url: 'http://books.example.test:8080/' }], output: 'reached' };
    expect(await runner.run(page, {}, ctx())).toBe('reached');
  });

  it('rejects undeclared hosts and bad ports when the recipe is validated', () => {
    expect(() => parseRecipe({ engine: 'http', hosts: ['books.example.test'], steps: [{ type: 'navigate', url: 'http://evil.example.test/' }], output: null })).toThrow(
      /steps\[0\]\.url: host "evil\.example\.test" is not listed/,
    );
    expect(() => parseRecipe({ engine: 'http', hosts: ['books.example.test'], steps: [{ type: 'navigate', url: 'http://books.example.test:25/' }], output: null })).toThrow(
      /steps\[0\]\.url: port 25 belongs to another protocol/,
    );
    expect(() => parseRecipe({ engine: 'http', hosts: ['books.example.test'], steps: [{ type: 'navigate', url: 'http://books.example.test:8443/' }], output: null })).not.toThrow();
  });

  it.each(['127.0.0.1', '169.254.169.254', '10.1.2.3', 'localhost'])('refuses the private destination %s', async (host) => {
    const recipe: Recipe = { engine: 'http', hosts: [host], steps: [{ type: 'navigate', url: `http://${host}:${sites.port}/` }], output: null };
    const e = await runError(recipe);
    expect(e.code).toBe('workflow_execution_failed');
    expect(e.details).toMatchObject({ reason: 'destination_refused' });
  });

  it('secret headers stay with their origin: a redirect to another host receives none of them', async () => {
    // (proxy-* headers cannot be set by a recipe at all: shared/recipes/schema.ts reservedHeader.)
    const headers = { 'x-api-key': '{{secrets.KEY}}', authorization: 'Bearer {{secrets.KEY}}', cookie: 'sid={{secrets.KEY}}', accept: 'application/json' };
    const via = (to: string): Recipe => ({
      engine: 'http',
      hosts: ['books.example.test', 'news.example.test'],
      secrets: ['KEY'],
      steps: [{ type: 'request', url: `http://books.example.test/__probe/redirect?to=${encodeURIComponent(to)}`, headers, parse: 'json', save_as: 'r' }],
      output: '{{vars.r.headers}}',
    });
    const c = () => ctx({ secrets: { KEY: 'sk_live_probe_secret' } });
    // same origin: the headers follow (so the probe can see them at all)
    const same = (await runner.run(via('http://books.example.test/__probe/headers'), {}, c())) as Record<string, string>;
    expect(same['x-api-key']).toBe('sk_live_probe_secret');
    expect(same.authorization).toBe('Bearer sk_live_probe_secret');
    // another host, and the same host on another port: only the harmless ones survive
    for (const to of ['http://news.example.test/__probe/headers', 'http://books.example.test:8080/__probe/headers']) {
      const got = (await runner.run(via(to), {}, c())) as Record<string, string>;
      expect(got.accept, to).toBe('application/json');
      expect(JSON.stringify(got), to).not.toContain('sk_live_probe_secret');
      for (const h of ['x-api-key', 'authorization', 'cookie']) expect(got[h], `${to} ${h}`).toBeUndefined();
    }
  });

  it('an action whose answer redirects to a refused destination is action_unconfirmed, never "not sent"', async () => {
    for (const to of ['http://127.0.0.1:1/done', 'http://news.example.test/done']) {
      const recipe: Recipe = {
        engine: 'http',
        hosts: ['books.example.test'],
        steps: [{ type: 'request', method: 'POST', url: `http://books.example.test/__probe/redirect?status=303&to=${encodeURIComponent(to)}`, json: { order: 1 }, action: true }],
        output: null,
      };
      const e = await runError(recipe);
      expect(e.code, to).toBe('action_unconfirmed');
    }
  });

  it('allows private destinations only when configured to', async () => {
    const open = createRecipeRunner({ allowPrivateNetwork: true });
    try {
      const recipe: Recipe = {
        engine: 'http',
        hosts: ['127.0.0.1'],
        steps: [{ type: 'request', url: `http://127.0.0.1:${sites.port}/__demo/state`, parse: 'json', save_as: 's' }],
        output: '{{vars.s.orders}}',
      };
      expect(await open.run(recipe, {}, ctx())).toBe(0);
    } finally {
      await open.close();
    }
  });
});

/** A probe answer carrying these Set-Cookie lines (with `to`, as a redirect there). */
function setCookies(host: string, lines: string[], to?: string): string {
  const q = new URLSearchParams();
  for (const line of lines) q.append('set', line);
  if (to) q.set('to', to);
  return `http://${host}/__probe/set-cookie?${q}`;
}

/** The cookies of a Cookie header the probe echoed, in a stable order. */
const cookiesOf = (echo: unknown): string[] => String((echo as { cookie?: string }).cookie ?? '').split('; ').filter(Boolean).sort();

describe('cookies (RFC 6265, as tough-cookie implements it)', () => {
  const SITES = ['books.example.test', 'news.example.test', 'shop.example.test'];
  const read = (url: string, save_as: string): Recipe['steps'][number] => ({ type: 'request', url, parse: 'json', save_as });
  const run = async (steps: Recipe['steps'], output: Record<string, string>) =>
    (await runner.run({ engine: 'http', hosts: SITES, steps, output }, {}, ctx())) as Record<string, { cookie?: string }>;

  it('a cookie goes only where its Domain and Path allow; Secure, public-suffix and foreign-domain cookies are never kept', async () => {
    const lines = [
      'host_only=1; Path=/',
      'scoped=1; Path=/__probe/headers/scoped',
      'secure=1; Path=/; Secure', // set over plain http: never kept, never sent over http
      'shared=1; Path=/; Domain=example.test', // the parent domain: every host under it
      'own=1; Path=/; Domain=.books.example.test', // its own domain (the leading dot is ignored)
      'foreign=1; Path=/; Domain=news.example.test', // another site's domain
      'suffix=1; Path=/; Domain=test', // a public suffix
    ];
    const out = await run(
      [
        read(setCookies('books.example.test', lines), 'set'),
        read('http://books.example.test/__probe/headers', 'root'),
        read('http://books.example.test/__probe/headers/scoped/deeper', 'scoped'),
        read('http://books.example.test/__probe/headers/scopedx', 'sibling'),
        read('http://news.example.test/__probe/headers', 'news'),
        read('http://shop.example.test/__probe/headers', 'shop'),
      ],
      { root: '{{vars.root.headers}}', scoped: '{{vars.scoped.headers}}', sibling: '{{vars.sibling.headers}}', news: '{{vars.news.headers}}', shop: '{{vars.shop.headers}}' },
    );
    expect(cookiesOf(out.root)).toEqual(['host_only=1', 'own=1', 'shared=1']);
    expect(cookiesOf(out.scoped)).toEqual(['host_only=1', 'own=1', 'scoped=1', 'shared=1']);
    expect(cookiesOf(out.sibling)).toEqual(['host_only=1', 'own=1', 'shared=1']); // /scopedx is not under /scoped
    expect(cookiesOf(out.news)).toEqual(['shared=1']);
    expect(cookiesOf(out.shop)).toEqual(['shared=1']);
    // The jar is the run's: the next run starts with none.
    const next = await run([read('http://books.example.test/__probe/headers', 'root')], { root: '{{vars.root.headers}}' });
    expect(cookiesOf(next.root)).toEqual([]);
  });

  it('a Secure cookie set over https goes back over https only, never over plain http to the same host (the demo sites are http only: the jar itself)', () => {
    const jar = new HttpCookies();
    expect(jar.store(new URL('https://books.example.test/login'), ['sid=1; Path=/; Secure; HttpOnly', 'pref=1; Path=/', '__Host-h=1; Path=/; Secure'])).toBeUndefined(); // synchronous
    expect(jar.header(new URL('https://books.example.test/account')).split('; ').sort()).toEqual(['__Host-h=1', 'pref=1', 'sid=1']);
    expect(jar.header(new URL('http://books.example.test/account'))).toBe('pref=1');
    expect(jar.header(new URL('https://shop.example.test/'))).toBe('');
    // not over plain http to a loopback address either
    jar.store(new URL('https://127.0.0.1/'), ['local=1; Path=/; Secure']);
    expect(jar.header(new URL('https://127.0.0.1/'))).toBe('local=1');
    expect(jar.header(new URL('http://127.0.0.1/'))).toBe('');
  });

  it('each redirect hop keeps what its own URL may set, and the next hop gets what its URL may have', async () => {
    const lines = ['hop_host=1; Path=/', 'hop_shared=1; Path=/; Domain=example.test', 'hop_foreign=1; Path=/; Domain=shop.example.test'];
    const out = await run(
      [read(setCookies('books.example.test', lines, 'http://news.example.test/__probe/headers'), 'news'), read('http://books.example.test/__probe/headers', 'books')],
      { news: '{{vars.news.headers}}', books: '{{vars.books.headers}}' },
    );
    expect(cookiesOf(out.news)).toEqual(['hop_shared=1']);
    expect(cookiesOf(out.books)).toEqual(['hop_host=1', 'hop_shared=1']);
  });

  it('an expired line removes only the cookie it names (name, domain and path); Max-Age wins over Expires', async () => {
    const EPOCH = 'Thu, 01 Jan 1970 00:00:00 GMT';
    const out = await run(
      [
        read(setCookies('books.example.test', ['keep=1; Path=/', 'gone=1; Path=/', 'old=1; Path=/']), 'a'),
        read(
          setCookies('books.example.test', ['keep=; Path=/elsewhere; Max-Age=0', 'gone=; Path=/; Max-Age=0', `old=1; Path=/; Expires=${EPOCH}`, `fresh=1; Path=/; Max-Age=3600; Expires=${EPOCH}`, 'never=1; Path=/; Max-Age=0']),
          'b',
        ),
        read('http://books.example.test/__probe/headers', 'root'),
      ],
      { root: '{{vars.root.headers}}' },
    );
    expect(cookiesOf(out.root)).toEqual(['fresh=1', 'keep=1']);
  });

  it('malformed lines and prefixed cookies that break their rules are ignored; the other lines of the answer are kept', async () => {
    const lines = ['=nameless; Path=/', 'no-equals-sign', ';;;', 'bad_domain=1; Path=/; Domain=..', 'bad_age=1; Path=/; Max-Age=soon', 'bad_date=1; Path=/; Expires=someday', '__Host-h=1; Path=/', '__Secure-s=1; Path=/', 'good=1; Path=/'];
    const out = await run([read(setCookies('books.example.test', lines), 'set'), read('http://books.example.test/__probe/headers', 'root')], { root: '{{vars.root.headers}}' });
    expect(cookiesOf(out.root)).toEqual(['bad_age=1', 'bad_date=1', 'good=1']);
  });
});

/** A probe answer setting `n` cookies `<name><i>` of `bytes` bytes each (with `to`, as a redirect there). */
function flood(host: string, q: { n: number; bytes: number; name: string; attr?: string; to?: string }): string {
  const p = new URLSearchParams({ n: String(q.n), bytes: String(q.bytes), name: q.name });
  if (q.attr) p.set('attr', q.attr);
  if (q.to) p.set('to', q.to);
  return `http://${host}/__probe/cookie-flood?${p}`;
}

describe('cookies within bounds (COOKIE_LIMITS): a hostile site cannot grow the jar or the Cookie header', () => {
  const SITES = ['books.example.test', 'news.example.test'];
  const read = (url: string, save_as: string): Recipe['steps'][number] => ({ type: 'request', url, parse: 'json', save_as });
  const echo = 'http://books.example.test/__probe/headers';
  const run = async (steps: Recipe['steps'], output: Record<string, string>) =>
    (await runner.run({ engine: 'http', hosts: SITES, steps, output }, {}, ctx())) as Record<string, { cookie?: string }>;

  it('the bounds are the documented ones (docs/contract-decisions.md, "Cookie bounds")', () => {
    expect(COOKIE_LIMITS).toEqual({ cookieBytes: 4096, perSite: 50, total: 300, headerBytes: 8192 });
  });

  it(`a site keeps at most ${COOKIE_LIMITS.perSite} cookies, set across hops and steps: the least recently used go first`, async () => {
    // 30 on each hop of a redirect (books → news → books), then 30 more in a second step: 120 in all,
    // for one site (example.test).
    const chain = flood('books.example.test', { n: 30, bytes: 8, name: 'a', to: flood('news.example.test', { n: 30, bytes: 8, name: 'b', attr: 'Domain=example.test', to: flood('books.example.test', { n: 30, bytes: 8, name: 'c' }) }) });
    const out = await run([read(chain, 'set'), read(flood('books.example.test', { n: 30, bytes: 8, name: 'd' }), 'more'), read(echo, 'root')], { root: '{{vars.root.headers}}' });
    const got = cookiesOf(out.root).map((c) => c.split('=')[0]!);
    expect(got).toHaveLength(COOKIE_LIMITS.perSite);
    // The newest 50: all of d, and the last 20 of c.
    expect(got.filter((n) => n.startsWith('d'))).toHaveLength(30);
    expect(got.filter((n) => n.startsWith('c')).sort()).toEqual(Array.from({ length: 20 }, (_, i) => `c${i + 10}`).sort());
  });

  it(`a cookie over ${COOKIE_LIMITS.cookieBytes} bytes (name and value) is ignored; the Cookie header stays within ${COOKIE_LIMITS.headerBytes} bytes and the run succeeds`, async () => {
    const size = COOKIE_LIMITS.cookieBytes;
    const out = await run(
      [
        read(flood('books.example.test', { n: 1, bytes: size - 3, name: 'ok' }), 'fits'), // "ok0" + value: exactly the limit
        read(flood('books.example.test', { n: 1, bytes: size - 2, name: 'no' }), 'over'), // one byte more
        // 3 × 3 cookies of 3 KB across the hops of one redirect, then 3 more in another step: 36 KB in
        // the jar, more than the demo server (Node: 16 KB of headers) takes in one request.
        read(flood('books.example.test', { n: 3, bytes: 3000, name: 'x', to: flood('books.example.test', { n: 3, bytes: 3000, name: 'y', to: flood('books.example.test', { n: 3, bytes: 3000, name: 'z' }) }) }), 'big'),
        read(flood('books.example.test', { n: 3, bytes: 3000, name: 'w' }), 'more'),
        read(echo, 'root'),
      ],
      { root: '{{vars.root.headers}}' },
    );
    const header = String(out.root.cookie ?? '');
    expect(Buffer.byteLength(header)).toBeLessThanOrEqual(COOKIE_LIMITS.headerBytes);
    const names = cookiesOf(out.root).map((c) => c.split('=')[0]!);
    // RFC 6265 §5.4 order (same Path: the older first) until the next would not fit: ok0 (4 KB) and
    // x0 (3 KB); every later 3 KB cookie would overflow. ("no0" was never kept.)
    expect(names).toEqual(['ok0', 'x0']);
    // Whole cookies, never a cut one.
    for (const c of cookiesOf(out.root)) expect(c.split('=')[1]!).toMatch(/^v+$/);
  });

  it(`a run keeps at most ${COOKIE_LIMITS.total} cookies in all, over many sites (the jar itself: the demo sites are one site)`, () => {
    const jar = new HttpCookies();
    for (let site = 0; site < 12; site++) {
      const url = new URL(`http://www.site${site}.example/`);
      jar.store(url, Array.from({ length: 40 }, (_, i) => `k${i}=1; Path=/`));
    }
    expect(jar.size).toBe(COOKIE_LIMITS.total);
    // The least recently used went: the first sites' cookies.
    expect(jar.header(new URL('http://www.site0.example/'))).toBe('');
    expect(jar.header(new URL('http://www.site11.example/')).split('; ')).toHaveLength(40);
  });
});

describe('SameSite: a hop another site redirected to is cross-site', () => {
  const read = (url: string, save_as: string, extra: Partial<Extract<Recipe['steps'][number], { type: 'request' }>> = {}): Recipe['steps'][number] => ({ type: 'request', url, parse: 'json', save_as, ...extra });
  const echo = 'http://books.example.test/__probe/headers';
  const via = (host: string, to: string, status = 302) => `http://${host}/__probe/redirect?status=${status}&to=${encodeURIComponent(to)}`;

  it('the recipe\'s own requests carry every cookie; a cross-site redirect leaves Strict cookies behind, and Lax ones unless GET', async () => {
    // probe.example.net is another site (example.net): the demo server answers its probe pages.
    const cross = createRecipeRunner({ hostMap: { ...sites.hostMap, [PROBE_ONLY_HOST]: sites.hostMap['books.example.test']! } });
    try {
      const out = (await cross.run(
        {
          engine: 'http',
          hosts: ['books.example.test', 'news.example.test', PROBE_ONLY_HOST],
          steps: [
            read(setCookies('books.example.test', ['strict=1; Path=/; SameSite=Strict', 'lax=1; Path=/; SameSite=Lax', 'plain=1; Path=/']), 'set'),
            read(echo, 'own'),
            read(via('news.example.test', echo), 'same_site'),
            read(via(PROBE_ONLY_HOST, echo), 'cross_get'),
            read(via(PROBE_ONLY_HOST, echo, 307), 'cross_post', { method: 'POST' }),
            // Back on books after the cross-site hop: still cross-site (the chain counts).
            read(via(PROBE_ONLY_HOST, via('books.example.test', echo)), 'back'),
          ],
          output: { own: '{{vars.own.headers}}', same_site: '{{vars.same_site.headers}}', cross_get: '{{vars.cross_get.headers}}', cross_post: '{{vars.cross_post.headers}}', back: '{{vars.back.headers}}' },
        },
        {},
        ctx(),
      )) as Record<string, unknown>;
      expect(cookiesOf(out.own)).toEqual(['lax=1', 'plain=1', 'strict=1']);
      expect(cookiesOf(out.same_site)).toEqual(['lax=1', 'plain=1', 'strict=1']);
      expect(cookiesOf(out.cross_get)).toEqual(['lax=1', 'plain=1']);
      expect(cookiesOf(out.cross_post)).toEqual(['plain=1']);
      expect(cookiesOf(out.back)).toEqual(['lax=1', 'plain=1']);
    } finally {
      await cross.close();
    }
  });
});

describe('a secret redaction cannot protect is never run with', () => {
  it('a secret shorter than MIN_SECRET_LENGTH, from anywhere, stops the run before anything is sent: auth_required, secret_too_short', async () => {
    const state = async () => ((await demo('/__demo/state')) as { requests: Record<string, number> }).requests['books.example.test'] ?? 0;
    const before = await state();
    const recipe: Recipe = {
      engine: 'http',
      hosts: ['books.example.test'],
      secrets: ['PIN'],
      steps: [{ type: 'request', url: 'http://books.example.test/__probe/headers', headers: { 'x-pin': '{{secrets.PIN}}' }, parse: 'json', save_as: 'r' }],
      output: '{{vars.r.headers}}',
    };
    const e = await runError(recipe, {}, ctx({ secrets: { PIN: '42' }, secretSites: { PIN: 'books.example.test' } }));
    expect(e.code).toBe('auth_required');
    expect(e.details).toEqual({ reason: 'secret_too_short' });
    expect(e.message).not.toContain('42');
    expect(await state()).toBe(before);
  });
});

describe('a body never follows a redirect to another origin', () => {
  const state = async () => ((await demo('/__demo/state')) as { requests: Record<string, number> }).requests;
  const post = (status: number, to: string, extra: Partial<Extract<Recipe['steps'][number], { type: 'request' }>> = {}): Recipe => ({
    engine: 'http',
    hosts: ['books.example.test', 'news.example.test'],
    secrets: ['PASSWORD'],
    steps: [
      {
        type: 'request',
        method: 'POST',
        url: `http://books.example.test/__probe/redirect?status=${status}&to=${encodeURIComponent(to)}`,
        form: { email: 'reader@example.test', password: '{{secrets.PASSWORD}}' },
        parse: 'json',
        save_as: 'r',
        ...extra,
      },
    ],
    output: { method: '{{vars.r.method}}', body: '{{vars.r.body}}' },
  });
  // The password is the books site's (its connection's): the recipe may send it there, and only there.
  const c = () => ctx({ secrets: { PASSWORD: 'hunter2-for-books' }, secretSites: { PASSWORD: 'books.example.test' } });

  it('a 307 or 308 that would resend a body to another origin is refused, finally (workflow_execution_failed, cross_origin_body_redirect) and the other origin sees nothing; on its own origin the body follows', async () => {
    for (const status of [307, 308]) {
      const e = await runError(post(status, 'http://news.example.test/__probe/headers'), {}, c());
      expect(e.code, String(status)).toBe('workflow_execution_failed');
      expect(e.details, String(status)).toEqual({ step: '0', host: 'books.example.test', reason: 'cross_origin_body_redirect' });
      expect(isFinalRefusal(e), String(status)).toBe(true);
      expect(JSON.stringify({ m: e.message, d: e.details })).not.toContain('hunter2');
    }
    // the same host on another port is another origin too
    expect((await runError(post(307, 'http://books.example.test:8080/__probe/headers'), {}, c())).details).toMatchObject({ reason: 'cross_origin_body_redirect' });
    expect((await state())['news.example.test'] ?? 0).toBe(0);
    // The same host moving it to https is followed with the body (the demo sites speak no TLS, so
    // that hop fails on the handshake: what matters is that it was tried, not refused).
    const upgraded = await runError(post(307, 'https://books.example.test/__probe/headers'), {}, c());
    expect(upgraded.details).toEqual({ step: '0', host: 'books.example.test', reason: 'network_error' });
    // On its own origin a 307 keeps the method and body; a 303 goes to another origin as a GET without the body.
    expect(await runner.run(post(307, 'http://books.example.test/__probe/headers'), {}, c())).toEqual({ method: 'POST', body: 'email=reader%40example.test&password=hunter2-for-books' });
    expect(await runner.run(post(303, 'http://news.example.test/__probe/headers'), {}, c())).toEqual({ method: 'GET', body: '' });
  });

  it('a header the recipe filled from a secret stays with its origin, even one of those kept across origins (accept-language, user-agent, ...)', async () => {
    const recipe = (to: string): Recipe => ({
      engine: 'http',
      hosts: ['books.example.test', 'news.example.test'],
      secrets: ['PASSWORD'],
      steps: [
        { type: 'set', var: 'v', value: 'x-{{secrets.PASSWORD}}' },
        {
          type: 'request',
          url: `http://books.example.test/__probe/redirect?status=302&to=${encodeURIComponent(to)}`,
          headers: { 'accept-language': '{{secrets.PASSWORD}}', 'user-agent': 'agent {{vars.v}}', 'content-language': 'en', accept: 'application/json' },
          parse: 'json',
          save_as: 'r',
        },
      ],
      output: '{{vars.r.headers}}',
    });
    const across = (await runner.run(recipe('http://news.example.test/__probe/headers'), {}, c())) as Record<string, string>;
    expect(JSON.stringify(across)).not.toContain('hunter2');
    // what no secret filled still goes along
    expect(across).toMatchObject({ 'content-language': 'en', accept: 'application/json' });
    expect(across['accept-language']).toBeUndefined();
    // on its own origin every header follows
    const same = (await runner.run(recipe('http://books.example.test/__probe/headers'), {}, c())) as Record<string, string>;
    expect(same).toMatchObject({ 'accept-language': 'hunter2-for-books', 'user-agent': 'agent x-hunter2-for-books' });
  });

  it('as an action it is action_unconfirmed: the first website had the request', async () => {
    const e = await runError(post(307, 'http://news.example.test/__probe/headers', { action: true }), {}, c());
    expect(e.code).toBe('action_unconfirmed');
    expect(e.details).toMatchObject({ cause: 'workflow_execution_failed' });
    expect((await state())['news.example.test'] ?? 0).toBe(0);
  });
});

describe('templates', () => {
  it('URL-encodes input inserted into a URL', async () => {
    const recipe: Recipe = {
      engine: 'http',
      hosts: ['books.example.test'],
      steps: [
        { type: 'navigate', url: 'http://books.example.test/search?q={{input.q}}&sort=price_asc' },
        { type: 'extract', fields: { query: { type: 'text', selector: 'h1 .query' }, url: { type: 'text', selector: 'nav.pagination a.next', attribute: 'href' } }, save_as: 'p' },
      ],
      output: { query: '{{vars.p.query}}' },
    };
    const q = 'Ellison & co=1#top?x/../y';
    expect(await runner.run(recipe, { q }, ctx())).toEqual({ query: q });
  });

  it('cannot climb out of a path segment', async () => {
    const recipe = booksPage('/books/{{input.isbn}}');
    const e = await runError(recipe, { isbn: '../categories/fiction' });
    expect(e.code).toBe('upstream_not_found');
    expect((e.details as { path: string }).path).toBe('/books/..%2Fcategories%2Ffiction');
  });

  it('an input of "." or ".." never climbs out of its path segment (it would reach /books/ or /): invalid_provider_input', async () => {
    for (const isbn of ['..', '.', '%2e%2E']) {
      const e = await runError(booksPage('/books/{{input.isbn}}'), { isbn });
      if (isbn.startsWith('%')) {
        // percent signs are encoded themselves: a segment of its own, never a dot segment
        expect(e.code).toBe('upstream_not_found');
        expect((e.details as { path: string }).path).toBe('/books/%252e%252E');
        continue;
      }
      expect(e.code).toBe('invalid_provider_input');
      expect(e.details).toEqual({ step: '0', reason: 'dot_segment' });
    }
  });

  it('an input that no header can carry (a control character, U+2028) is invalid_provider_input naming the header, nothing sent; even in an action', async () => {
    const state = async () => ((await demo('/__demo/state')) as { requests: Record<string, number> }).requests['books.example.test'] ?? 0;
    const recipe = (action: boolean): Recipe => ({
      engine: 'http',
      hosts: ['books.example.test'],
      steps: [{ type: 'request', method: 'POST', action, url: 'http://books.example.test/__probe/headers', headers: { 'X-Note': 'note: {{input.note}}' }, json: { a: 1 }, parse: 'json', save_as: 'r' }],
      output: '{{vars.r.headers}}',
    });
    const before = await state();
    for (const note of ['line\u2028break', 'bell\u0007', 'del\u007f']) {
      for (const action of [false, true]) {
        const e = await runError(recipe(action), { note });
        expect(e.code, `${JSON.stringify(note)} action=${action}`).toBe('invalid_provider_input');
        expect(e.details).toEqual({ step: '0', header: 'x-note', reason: 'invalid_header_value' });
      }
    }
    expect(await state()).toBe(before);
    // what a header can carry goes as it is: tabs, Latin-1
    expect(await runner.run(recipe(false), { note: 'café\tcrème' }, ctx())).toMatchObject({ 'x-note': 'note: café\tcrème' });
  });

  it('keeps types for a lone placeholder and assembles nested output', async () => {
    const recipe: Recipe = {
      engine: 'http',
      hosts: ['weather.example.test'],
      steps: [
        { type: 'request', url: 'http://weather.example.test/api/v1/forecast', query: { city: '{{input.city}}', days: '{{input.days}}' }, parse: 'json', save_as: 'f' },
        { type: 'set', var: 'first', value: '{{vars.f.days[0]}}' },
      ],
      output: { city: '{{vars.f.city}}', n: '{{vars.f.days.length}}', first_max: '{{vars.first.max_c}}', label: '{{vars.f.city}} ({{vars.f.country}})' },
    };
    const out = (await runner.run(recipe, { city: 'Rome', days: 2 }, ctx())) as Record<string, unknown>;
    expect(out).toMatchObject({ city: 'Rome', n: 2, label: 'Rome (IT)' });
    expect(typeof out.first_max).toBe('number');
  });
});

describe('secrets', () => {
  const history: Recipe = {
    engine: 'http',
    hosts: ['weather.example.test'],
    secrets: ['WEATHER_API_KEY'],
    steps: [
      {
        type: 'request',
        url: 'http://weather.example.test/api/v1/history',
        query: { city: 'London', date: '2025-05-01' },
        headers: { 'X-Api-Key': '{{secrets.WEATHER_API_KEY}}' },
        parse: 'json',
        save_as: 'h',
      },
    ],
    output: { city: '{{vars.h.city}}', date: '{{vars.h.date}}' },
  };

  it('sends a secret and never returns it', async () => {
    expect(await runner.run(history, {}, ctx({ secrets: { WEATHER_API_KEY: 'wk_demo_valid_key_123' } }))).toEqual({ city: 'London', date: '2025-05-01' });
  });

  it('missing → credentials_missing, rejected → credentials_rejected, denied → source_permission_denied', async () => {
    expect((await runError(history, {}, ctx({ secrets: {} }))).code).toBe('credentials_missing');
    const rejected = await runError(history, {}, ctx({ secrets: { WEATHER_API_KEY: 'wk_wrong_secret_value' } }));
    expect(rejected.code).toBe('credentials_rejected');
    expect(JSON.stringify({ m: rejected.message, d: rejected.details })).not.toContain('wk_wrong_secret_value');
    expect((await runError(history, {}, ctx({ secrets: { WEATHER_API_KEY: 'wk_demo_denied_key' } }))).code).toBe('source_permission_denied');
  });

  it('redacts a secret that appears in an error', async () => {
    const recipe: Recipe = {
      engine: 'http',
      hosts: ['books.example.test'],
      secrets: ['TOKEN'],
      steps: [{ type: 'navigate', url: 'http://books.example.test/books/{{secrets.TOKEN}}' }],
      output: null,
    };
    const e = await runError(recipe, {}, ctx({ secrets: { TOKEN: 'tok_super_secret' } }));
    expect(e.code).toBe('upstream_not_found');
    expect(JSON.stringify({ m: e.message, d: e.details })).not.toContain('tok_super_secret');
  });

  it('a recipe cannot put a secret into its output', () => {
    expect(() => parseRecipe({ ...history, output: '{{secrets.WEATHER_API_KEY}}' })).toThrow(/output: the output must never contain secrets/);
  });
});

describe('actions', () => {
  it('a repeated booking with the same request reference books once', async () => {
    const book = demoCatalog.find((a) => a.handle === '@clinic')!.operations.find((o) => o.name === 'book_appointment')!.versions[0]!;
    const input = book.examples[0]!.input;
    const first = await runner.run(book.recipe as Recipe, input, ctx({ requestRef: 'req_same_ref' }));
    const again = await runner.run(book.recipe as Recipe, input, ctx({ requestRef: 'req_same_ref' }));
    expect(again).toEqual(first);
    expect(((await demo('/__demo/state')) as { bookings: number }).bookings).toBe(1);
    // a different request for the same slot finds it taken
    const e = await runError(book.recipe as Recipe, input, ctx({ requestRef: 'req_other_ref' }));
    expect(e.code).toBe('not_found');
    expect(((await demo('/__demo/state')) as { bookings: number }).bookings).toBe(1);
  });

  const action = (afterStep = false): Recipe => ({
    engine: 'http',
    hosts: ['books.example.test'],
    steps: [
      { type: 'request', name: 'Place order', method: 'POST', url: 'http://books.example.test/order', form: { ref: '{{run.request_ref}}' }, action: true, expect_status: [200, 404] },
      ...(afterStep ? [{ type: 'navigate' as const, name: 'Read confirmation', url: 'http://books.example.test/confirm' }] : []),
    ],
    output: null,
  });

  it('an uncertain outcome of an action step is action_unconfirmed', async () => {
    await demo('/__demo/faults', { host: 'books.example.test', path_prefix: '/order', status: 502 });
    const e = await runError(action());
    expect(e.code).toBe('action_unconfirmed');
    expect(e.details).toMatchObject({ cause: 'upstream_http_error' });
  });

  it('a clear refusal of an action keeps its code', async () => {
    await demo('/__demo/faults', { host: 'books.example.test', path_prefix: '/order', status: 429 });
    expect((await runError(action())).code).toBe('source_rate_limited');
  });

  it('a failure after an action is workflow_partially_completed', async () => {
    const e = await runError(action(true));
    expect(e.code).toBe('workflow_partially_completed');
    expect(e.details).toMatchObject({ cause: 'upstream_not_found', completed_actions: 1 });
  });
});
