// The browser engine (playwright-core + Debian Chromium) against the demo sites: every example of
// every browser demo operation, destination checks, actions, aborts, concurrency and relaunch.
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { PROBE_ONLY_HOST, startDemoSites, type DemoSites } from '../apps/demo-sites/server.ts';
import { createRecipeRunner, type RecipeRunner, type RunContext } from '../activities/engines/index.ts';
import { BrowserPool, sandboxPlan } from '../activities/engines/browser-engine.ts';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { ROOT } from './helpers/processes.ts';
import { demoCatalog } from '../shared/catalog/demo/index.ts';
import { parseRecipe, type Recipe } from '../shared/recipes/schema.ts';
import { ServiceError } from '../shared/errors.ts';
import { defaultChromiumPath } from '../shared/config.ts';
import { startInsideServer, type InsideServer } from './helpers/inside-server.ts';

const CHROMIUM = process.env.CHROMIUM_PATH ?? defaultChromiumPath();
const SECRETS = { WEATHER_API_KEY: 'wk_demo_valid_key_123', SHOP_EMAIL: 'demo@shop.example.test', SHOP_PASSWORD: 'correct-horse' };

let sites: DemoSites;
let runner: RecipeRunner;

const ctx = (extra: Partial<RunContext> = {}): RunContext => ({ signal: new AbortController().signal, heartbeat() {}, requestRef: 'req_browser_0001', ...extra });

async function demo(path: string, body?: unknown): Promise<any> {
  const res = await fetch(`${sites.origin}${path}`, body === undefined ? undefined : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return res.json();
}

async function runError(recipe: unknown, input: Record<string, unknown> = {}, c: RunContext = ctx(), r: { run: RecipeRunner['run'] } = runner): Promise<ServiceError> {
  try {
    await r.run(recipe as Recipe, input, c);
  } catch (e) {
    expect(e).toBeInstanceOf(ServiceError);
    return e as ServiceError;
  }
  throw new Error('expected the run to fail');
}

const op = (handle: string, name: string) => demoCatalog.find((a) => a.handle === handle)!.operations.find((o) => o.name === name)!;

describe.skipIf(!existsSync(CHROMIUM))('browser engine', () => {
  beforeAll(async () => {
    sites = await startDemoSites();
    runner = createRecipeRunner({ hostMap: sites.hostMap, chromiumPath: CHROMIUM, browserConcurrency: 2 });
  });
  afterAll(async () => {
    await runner?.close();
    await sites?.close();
  });
  beforeEach(async () => {
    await demo('/__demo/reset', {});
  });

  describe('demo catalog examples', () => {
    const cases = demoCatalog.flatMap((api) =>
      api.operations.flatMap((o) =>
        o.versions
          .filter((v) => (v.recipe as Recipe).engine === 'browser')
          .flatMap((v) => v.examples.map((ex, i) => ({ name: `${api.handle} ${o.name} v${v.version} #${i + 1} ${ex.title ?? ''}`, o, v, ex }))),
      ),
    );

    it('has at least four browser operations', () => {
      expect(new Set(cases.map((c) => c.o.name)).size).toBeGreaterThanOrEqual(4);
    });

    it.each(cases)('$name', async ({ o, v, ex }) => {
      const beats: unknown[] = [];
      const out = await runner.run(parseRecipe(v.recipe), ex.input, ctx({ secrets: o.access?.length ? SECRETS : undefined, heartbeat: (d) => beats.push(d) }));
      expect(out).toEqual(ex.output);
      expect(beats.length).toBeGreaterThanOrEqual(parseRecipe(v.recipe).steps.length);
    });
  });

  it('an unknown job is not_found', async () => {
    const e = await runError(op('@jobs', 'get_job').versions[0]!.recipe, { job_id: 'J0000' });
    expect(e.code).toBe('not_found');
  });

  it('a wrong password is credentials_rejected and never leaks', async () => {
    const e = await runError(op('@shop', 'list_orders').versions[0]!.recipe, {}, ctx({ secrets: { ...SECRETS, SHOP_PASSWORD: 'wrong-password-xyz' } }));
    expect(e.code).toBe('credentials_rejected');
    expect(JSON.stringify({ m: e.message, d: e.details })).not.toContain('wrong-password-xyz');
  });

  it('a missing account secret is credentials_missing', async () => {
    const e = await runError(op('@shop', 'list_orders').versions[0]!.recipe, {}, ctx({ secrets: {} }));
    expect(e.code).toBe('credentials_missing');
  });

  it('a repeated order with the same request reference orders once', async () => {
    const place = op('@shop', 'place_order').versions[0]!;
    const input = { sku: 'NW-BAG-28L', quantity: 1 };
    const first = (await runner.run(place.recipe as Recipe, input, ctx({ secrets: SECRETS, requestRef: 'req_order_same' }))) as { order_id: string };
    const again = await runner.run(place.recipe as Recipe, input, ctx({ secrets: SECRETS, requestRef: 'req_order_same' }));
    expect(again).toEqual(first);
    expect((await demo('/__demo/state')).orders).toBe(1);
    const other = (await runner.run(place.recipe as Recipe, input, ctx({ secrets: SECRETS, requestRef: 'req_order_other' }))) as { order_id: string };
    expect(other.order_id).not.toBe(first.order_id);
    expect((await demo('/__demo/state')).orders).toBe(2);
  });

  it('an out-of-stock product is not_found and orders nothing', async () => {
    const e = await runError(op('@shop', 'place_order').versions[0]!.recipe, { sku: 'NW-STOVE-MINI', quantity: 1 }, ctx({ secrets: SECRETS }));
    expect(e.code).toBe('not_found');
    expect((await demo('/__demo/state')).orders).toBe(0);
  });

  it('an uncertain order submit is action_unconfirmed', async () => {
    await demo('/__demo/faults', { host: 'shop.example.test', path_prefix: '/orders', method: 'POST', status: 502 });
    const e = await runError(op('@shop', 'place_order').versions[0]!.recipe, { sku: 'NW-MUG-STL', quantity: 1 }, ctx({ secrets: SECRETS }));
    expect(e.code).toBe('action_unconfirmed');
  });

  it('maps page statuses: 404 upstream_not_found, 429 source_rate_limited, 503 upstream_http_error', async () => {
    const nav = (path: string): Recipe => ({ engine: 'browser', hosts: ['news.example.test'], steps: [{ type: 'navigate', url: `http://news.example.test${path}` }], output: null });
    expect((await runError(nav('/nowhere'))).code).toBe('upstream_not_found');
    await demo('/__demo/faults', { host: 'news.example.test', path_prefix: '/busy', status: 429, retry_after_s: 5 });
    const rl = await runError(nav('/busy'));
    expect(rl.code).toBe('source_rate_limited');
    expect(rl.details).toMatchObject({ retry_after_seconds: 5 });
    await demo('/__demo/faults', { host: 'news.example.test', path_prefix: '/down', status: 503 });
    expect((await runError(nav('/down'))).code).toBe('upstream_http_error');
  });

  it('refuses private destinations and undeclared hosts', async () => {
    const priv: Recipe = { engine: 'browser', hosts: ['127.0.0.1'], steps: [{ type: 'navigate', url: `http://127.0.0.1:${sites.port}/` }], output: null };
    const e = await runError(priv);
    expect(e.code).toBe('workflow_execution_failed');
    expect(e.details).toMatchObject({ reason: 'destination_refused' });
    const other: Recipe = { engine: 'browser', hosts: ['news.example.test'], steps: [{ type: 'navigate', url: '{{input.url}}' }], output: null };
    const e2 = await runError(other, { url: 'http://books.example.test/' });
    expect(e2.details).toMatchObject({ reason: 'host_not_allowed' });
  });

  it('blocks requests a page makes to hosts the recipe does not declare', async () => {
    // The clinic page is fine on its own; a recipe that only declares the clinic cannot fetch news from it.
    const recipe: Recipe = {
      engine: 'browser',
      hosts: ['clinic.example.test'],
      steps: [
        { type: 'navigate', url: 'http://clinic.example.test/' },
        { type: 'fill', selector: '#date', value: '2025-06-10' },
        { type: 'click', selector: '#find-slots', wait_for_navigation: true },
        { type: 'extract', fields: { n: { type: 'integer', selector: '.slot-count', attribute: 'data-count' } }, save_as: 'r' },
      ],
      output: '{{vars.r.n}}',
    };
    expect(typeof (await runner.run(recipe, {}, ctx()))).toBe('number');
    const before = (await demo('/__demo/state')).requests['news.example.test'] ?? 0;
    const sneaky: Recipe = { ...recipe, steps: [{ type: 'navigate', url: 'http://clinic.example.test/' }, { type: 'navigate', url: '{{input.next}}' }] };
    const e = await runError(sneaky, { next: 'http://news.example.test/' });
    expect(e.details).toMatchObject({ reason: 'host_not_allowed' });
    expect((await demo('/__demo/state')).requests['news.example.test'] ?? 0).toBe(before);
  });

  it('the read steps between two page steps see one state of the page; a page step makes the next read fresh', async () => {
    // #tick counts up without pause: two reads of the DOM a moment apart differ.
    const tick = { type: 'extract', fields: { n: { type: 'integer', selector: '#tick' } } };
    const recipe = {
      engine: 'browser',
      hosts: ['books.example.test'],
      steps: [
        { type: 'navigate', url: 'http://books.example.test/__probe/ticker' },
        { type: 'wait', selector: '#tick', state: 'attached' },
        { ...tick, save_as: 'a' },
        { type: 'fail', when: { selector_absent: '#tick' }, code: 'upstream_http_error' },
        { type: 'set', var: 'x', value: 1 },
        { ...tick, save_as: 'b' },
        { type: 'wait', selector: '#tick', state: 'attached' },
        { ...tick, save_as: 'c' },
      ],
      output: { a: '{{vars.a.n}}', b: '{{vars.b.n}}', c: '{{vars.c.n}}' },
    } as Recipe;
    for (let i = 0; i < 3; i++) {
      const out = (await runner.run(recipe, {}, ctx())) as { a: number; b: number; c: number };
      expect(out.a).toBeGreaterThan(0);
      expect(out.b).toBe(out.a);
      expect(out.c).toBeGreaterThan(out.b);
    }
  });

  describe('every hop and every connection is checked', () => {
    // A loopback server outside the host map: the "internal service" a hostile page points at.
    let inside: InsideServer;
    let insidePort = 0;
    beforeAll(async () => {
      inside = await startInsideServer();
      insidePort = inside.port;
    });
    afterAll(() => inside.close());
    beforeEach(() => inside.reset());

    const books = (steps: unknown[]): Recipe => ({ engine: 'browser', hosts: ['books.example.test'], steps, output: '{{vars.r.t}}' } as Recipe);
    const read = { type: 'extract', fields: { t: { type: 'text', selector: 'h1' } }, save_as: 'r' };
    const probe = (q: Record<string, string>) => `http://books.example.test/__probe/page?${new URLSearchParams(q)}`;

    it('a redirect to a loopback port, a metadata address or localhost is refused', async () => {
      for (const to of [`http://127.0.0.1:${insidePort}/admin`, 'http://169.254.169.254/latest/meta-data/', `http://localhost:${insidePort}/`, `http://[::1]:${insidePort}/`]) {
        const e = await runError(books([{ type: 'navigate', url: `http://books.example.test/__probe/redirect?to=${encodeURIComponent(to)}` }, read]));
        expect(e.code, to).toBe('workflow_execution_failed');
        expect(e.details, to).toMatchObject({ reason: 'destination_refused' });
      }
      expect(inside.seen()).toBe(0);
    });

    it('a redirect to an undeclared public host is refused and never reaches it', async () => {
      const before = (await demo('/__demo/state')).requests['news.example.test'] ?? 0;
      const e = await runError(books([{ type: 'navigate', url: `http://books.example.test/__probe/redirect?to=${encodeURIComponent('http://news.example.test/')}` }, read]));
      expect(e.details).toMatchObject({ reason: 'host_not_allowed', host: 'news.example.test' });
      expect((await demo('/__demo/state')).requests['news.example.test'] ?? 0).toBe(before);
    });

    it('a link the page offers to a loopback port is refused when followed', async () => {
      const e = await runError(books([{ type: 'navigate', url: probe({ link: `http://127.0.0.1:${insidePort}/` }) }, { type: 'click', selector: '#next', wait_for_navigation: true }, read]));
      expect(e.details).toMatchObject({ reason: 'destination_refused' });
      expect(inside.seen()).toBe(0);
    });

    it.each([
      ['fetch', (p: number) => ({ fetch: `http://127.0.0.1:${p}/secret` })],
      ['WebSocket', (p: number) => ({ ws: `ws://127.0.0.1:${p}/socket` })],
      ['EventSource', (p: number) => ({ sse: `http://127.0.0.1:${p}/events` })],
      ['fetch to link-local', () => ({ fetch: 'http://169.254.169.254/latest/meta-data/' })],
    ])('a %s from the page to a private address fails the run and reaches nothing', async (_kind, q) => {
      const e = await runError(books([{ type: 'navigate', url: probe(q(insidePort)) }, { type: 'wait', selector: '#done', state: 'attached' }, read]));
      expect(e.code).toBe('workflow_execution_failed');
      expect(e.details).toMatchObject({ reason: 'destination_refused' });
      expect(inside.seen()).toBe(0);
    });

    it('an action click whose next page is refused is action_unconfirmed (the click reached the website)', async () => {
      const to = `http://books.example.test/__probe/redirect?to=${encodeURIComponent(`http://127.0.0.1:${insidePort}/`)}`;
      const e = await runError(books([{ type: 'navigate', url: probe({ link: to }) }, { type: 'click', selector: '#next', wait_for_navigation: true, action: true }, read]));
      expect(e.code).toBe('action_unconfirmed');
      expect(inside.seen()).toBe(0);
    });

    it('the same probe page without outbound calls runs (so the refusals above are about the destinations)', async () => {
      expect(await runner.run(books([{ type: 'navigate', url: probe({}) }, { type: 'wait', selector: '#done', state: 'attached' }, read]), {}, ctx())).toBe('Probe');
      const ok = await runner.run(books([{ type: 'navigate', url: probe({ fetch: 'http://books.example.test/__probe/headers' }) }, { type: 'wait', selector: '#done', state: 'attached' }, read]), {}, ctx());
      expect(ok).toBe('Probe');
    });
  });

  it("request steps share the context's cookies with every attribute kept: set on each hop, sent by domain and path, HttpOnly hidden from the page", async () => {
    const setCookies = (lines: string[], to?: string) => {
      const q = new URLSearchParams();
      for (const line of lines) q.append('set', line);
      if (to) q.set('to', to);
      return `http://books.example.test/__probe/set-cookie?${q}`;
    };
    const lines = [
      'plain=1; Path=/',
      'http_only=1; Path=/; HttpOnly',
      'scoped=1; Path=/__probe/headers/scoped',
      'shared=1; Path=/; Domain=example.test',
      'foreign=1; Path=/; Domain=news.example.test',
      'suffix=1; Path=/; Domain=test',
      'secure=1; Path=/; Secure',
      'never=1; Path=/; Max-Age=0',
      '=nameless; Path=/',
      '__Host-h=1; Path=/',
    ];
    const request = (url: string, save_as: string) => ({ type: 'request', url, parse: 'json', save_as });
    const pageCookies = (host: string, save_as: string) => [
      { type: 'navigate', url: `http://${host}/__probe/document-cookie` },
      { type: 'extract', fields: { cookie: { type: 'text', selector: '#cookie' } }, save_as },
    ];
    const recipe = parseRecipe({
      engine: 'browser',
      hosts: ['books.example.test', 'news.example.test'],
      steps: [
        // The lines come with a redirect hop; the hop after it already sends what they set.
        request(setCookies(lines, 'http://books.example.test/__probe/headers'), 'hop'),
        request('http://books.example.test/__probe/headers/scoped/x', 'scoped'),
        request('http://news.example.test/__probe/headers', 'news'),
        ...pageCookies('books.example.test', 'books_page'),
        ...pageCookies('news.example.test', 'news_page'),
        // Removing a cookie: only the one with that name, domain and path.
        request(setCookies(['plain=; Path=/; Max-Age=0', 'shared=; Path=/elsewhere; Max-Age=0']), 'unset'),
        request('http://books.example.test/__probe/headers', 'after'),
      ],
      output: {
        hop: '{{vars.hop.headers}}',
        scoped: '{{vars.scoped.headers}}',
        news: '{{vars.news.headers}}',
        books_page: '{{vars.books_page.cookie}}',
        news_page: '{{vars.news_page.cookie}}',
        after: '{{vars.after.headers}}',
      },
    });
    const out = (await runner.run(recipe, {}, ctx())) as Record<string, unknown>;
    const sent = (echo: unknown) => String((echo as { cookie?: string }).cookie ?? '').split('; ').filter(Boolean).sort();
    const seen = (text: unknown) => String(text).split('; ').sort();
    expect(sent(out.hop)).toEqual(['http_only=1', 'plain=1', 'shared=1']);
    expect(sent(out.scoped)).toEqual(['http_only=1', 'plain=1', 'scoped=1', 'shared=1']);
    expect(sent(out.news)).toEqual(['shared=1']);
    expect(seen(out.books_page)).toEqual(['plain=1', 'shared=1']);
    expect(seen(out.news_page)).toEqual(['shared=1']);
    expect(sent(out.after)).toEqual(['http_only=1', 'shared=1']);
  });

  it("request steps keep the HTTP engine's cookie bounds and SameSite rule with the context's cookies", async () => {
    // probe.example.net is another site (example.net) than books.example.test: a redirect from it is cross-site.
    const cross = createRecipeRunner({ hostMap: { ...sites.hostMap, [PROBE_ONLY_HOST]: sites.hostMap['books.example.test']! }, chromiumPath: CHROMIUM, browserConcurrency: 1 });
    const echo = 'http://books.example.test/__probe/headers';
    const via = (host: string, to: string) => `http://${host}/__probe/redirect?to=${encodeURIComponent(to)}`;
    const flood = (name: string, n: number, bytes: number, attr?: string) =>
      `http://books.example.test/__probe/cookie-flood?${new URLSearchParams({ name, n: String(n), bytes: String(bytes), ...(attr ? { attr } : {}) })}`;
    const request = (url: string, save_as: string) => ({ type: 'request', url, parse: 'json', save_as });
    try {
      const out = (await cross.run(
        parseRecipe({
          engine: 'browser',
          hosts: ['books.example.test', PROBE_ONLY_HOST],
          steps: [
            request(flood('strict', 1, 1, 'SameSite=Strict'), 's'),
            request(flood('lax', 1, 1, 'SameSite=Lax'), 'l'),
            request(flood('over', 1, 4096), 'o'), // "over0" + 4096 bytes: over the bound
            request(echo, 'own'),
            request(via(PROBE_ONLY_HOST, echo), 'cross'),
            // 5 × 3 KB: more than the 8 KB the Cookie header may carry.
            request(flood('big', 5, 3000), 'b'),
            request(echo, 'big'),
          ],
          output: { own: '{{vars.own.headers}}', cross: '{{vars.cross.headers}}', big: '{{vars.big.headers}}' },
        }),
        {},
        ctx(),
      )) as Record<string, { cookie?: string }>;
      const names = (echo: { cookie?: string }) => String(echo.cookie ?? '').split('; ').filter(Boolean).map((c) => c.split('=')[0]!).sort();
      expect(names(out.own!)).toEqual(['lax0', 'strict0']);
      expect(names(out.cross!)).toEqual(['lax0']);
      expect(Buffer.byteLength(String(out.big!.cookie))).toBeLessThanOrEqual(8192);
      expect(names(out.big!)).toContain('strict0');
      expect(names(out.big!).filter((n) => n.startsWith('big')).length).toBeGreaterThanOrEqual(1);
    } finally {
      await cross.close();
    }
  });

  it('an abort closes the page quickly and is execution_timeout', async () => {
    await demo('/__demo/faults', { host: 'news.example.test', path_prefix: '/', latency_ms: 5000 });
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 300);
    const started = Date.now();
    const slow: Recipe = { engine: 'browser', hosts: ['news.example.test'], steps: [{ type: 'navigate', url: 'http://news.example.test/' }], output: null };
    const e = await runError(slow, {}, ctx({ signal: ac.signal }));
    expect(e.code).toBe('execution_timeout');
    expect(Date.now() - started).toBeLessThan(3000);
  });
});

describe.skipIf(!existsSync(CHROMIUM))('browser pool', () => {
  let pool: BrowserPool;
  beforeAll(async () => {
    sites = await startDemoSites();
    pool = new BrowserPool({ hostMap: sites.hostMap, chromiumPath: CHROMIUM, concurrency: 2, allowPrivateNetwork: false });
  });
  afterAll(async () => {
    await pool?.close();
    await sites?.close();
  });

  const headline: Recipe = {
    engine: 'browser',
    hosts: ['news.example.test'],
    steps: [
      { type: 'navigate', url: 'http://news.example.test/' },
      { type: 'extract', fields: { first: { type: 'text', selector: 'li.article-summary .headline a' } }, save_as: 'p' },
    ],
    output: '{{vars.p.first}}',
  };
  const run = (recipe: Recipe, signal = new AbortController().signal) => pool.run(parseRecipe(recipe), {}, ctx({ signal }), signal);

  it("pages run in Chromium's sandbox for a worker that is not root; as root it is off and says why, and CHROMIUM_SANDBOX=on refuses to start", async () => {
    expect(sandboxPlan('auto', 1000)).toEqual({ try: true });
    expect(sandboxPlan('auto', 0)).toEqual({ try: false, reason: 'the worker runs as root, where Chromium cannot use its sandbox' });
    expect(sandboxPlan('on', 0)).toEqual({ try: true });
    expect(sandboxPlan('off', 1000)).toEqual({ try: false, reason: 'CHROMIUM_SANDBOX=off' });
    const root = process.getuid?.() === 0;
    const probe = async (mode: string, asUser: boolean) => {
      const env = { ...process.env, HOME: '/tmp', SANDBOX: mode, HOST_MAP: JSON.stringify(sites.hostMap), CHROMIUM };
      const node = [process.execPath, '--import', 'tsx', 'test/helpers/sandbox-probe.ts'];
      // As a deployed worker runs: an unprivileged user (the image's `node`; here `nobody`).
      const [cmd, ...args] = asUser ? ['runuser', '-u', 'nobody', '--', ...node] : node;
      const { stdout } = await promisify(execFile)(cmd!, args, { cwd: ROOT, env, timeout: 60_000 });
      return JSON.parse(stdout.trim().split('\n').at(-1)!) as { uid: number; output: unknown; error: string | null; sandboxed: boolean | null; renderers: Array<{ seccomp: number }> };
    };
    const headline = 'Coastal towns vote to share flood defence costs';
    const unprivileged = await probe('auto', root);
    expect(unprivileged).toMatchObject({ output: headline, error: null, sandboxed: true });
    expect(unprivileged.uid).not.toBe(0);
    // The kernel's word: each renderer runs under Chromium's seccomp filter (mode 2).
    expect(unprivileged.renderers.length).toBeGreaterThan(0);
    expect(unprivileged.renderers.every((r) => r.seccomp === 2), JSON.stringify(unprivileged.renderers)).toBe(true);
    if (!root) return;
    const asRoot = await probe('auto', false);
    expect(asRoot).toMatchObject({ output: headline, error: null, sandboxed: false });
    expect(asRoot.renderers.every((r) => r.seccomp === 0), JSON.stringify(asRoot.renderers)).toBe(true);
    const required = await probe('on', false);
    expect(required).toMatchObject({ output: null, sandboxed: null, error: expect.stringMatching(/^The browser could not be started: Chromium's sandbox is required \(CHROMIUM_SANDBOX=on\)/) });
  });

  it('keeps one warm browser, a fresh context per run, and relaunches after a crash', async () => {
    expect(await run(headline)).toBe('Coastal towns vote to share flood defence costs');
    expect(await run(headline)).toBe('Coastal towns vote to share flood defence costs');
    expect(pool.launches).toBe(1);
    // The runs' contexts are closed (just after they answered); what stays is the next run's,
    // made ahead of it, on a blank page.
    const pages = () => pool.current!.contexts().map((c) => c.pages().map((p) => p.url()));
    await expect.poll(pages, { timeout: 5_000 }).toEqual([['about:blank']]);
    await pool.current!.close(); // the browser goes away
    expect(await run(headline)).toBe('Coastal towns vote to share flood defence costs');
    expect(pool.launches).toBe(2);
  });

  it('a browser that dies mid-run fails that run retryably, and the next run works', async () => {
    await fetch(`${sites.origin}/__demo/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ host: 'news.example.test', path_prefix: '/', latency_ms: 2000, times: 1 }) });
    const pending = run(headline).then(
      () => null,
      (e: unknown) => e,
    );
    await new Promise((r) => setTimeout(r, 500));
    await pool.current!.close();
    const e = (await pending) as ServiceError;
    expect(e).toBeInstanceOf(ServiceError);
    expect(e.code).toBe('workflow_execution_failed');
    expect(await run(headline)).toBe('Coastal towns vote to share flood defence costs');
  });

  it('the context made ahead of a run carries nothing from the run before it: no session, no host', async () => {
    const state = async () => (await fetch(`${sites.origin}/__demo/state`).then((r) => r.json())) as { requests: Record<string, number> };
    const listOrders = parseRecipe(op('@shop', 'list_orders').versions[0]!.recipe);
    const go = (recipe: Recipe, input: Record<string, unknown>, secrets?: Record<string, string>) => {
      const signal = new AbortController().signal;
      return pool.run(recipe, input, ctx({ signal, secrets }), signal);
    };
    // Signed in: the shop's session cookie is in that run's context.
    await go(listOrders, {}, SECRETS);
    // The next run's context was made while that run went on; it has no cookie of it...
    await expect.poll(() => pool.current!.contexts().map((c) => c.pages().map((p) => p.url())), { timeout: 5_000 }).toEqual([['about:blank']]);
    expect(await pool.current!.contexts()[0]!.cookies()).toEqual([]);
    // ...so a run with a wrong password is not signed in by the session before it.
    const e = (await go(listOrders, {}, { ...SECRETS, SHOP_PASSWORD: 'wrong-password-xyz' }).catch((x: unknown) => x)) as ServiceError;
    expect(e).toBeInstanceOf(ServiceError);
    expect(e.code).toBe('credentials_rejected');
    // A run declaring only the books site, whose page redirects to the shop the runs before it
    // could reach: its context's proxy refuses the shop, which sees nothing.
    const sneaky = parseRecipe({ engine: 'browser', hosts: ['books.example.test'], steps: [{ type: 'navigate', url: '{{input.url}}' }], output: null });
    const before = (await state()).requests['shop.example.test'] ?? 0;
    const url = `http://books.example.test/__probe/redirect?to=${encodeURIComponent('http://shop.example.test/')}`;
    const refused = (await go(sneaky, { url }).catch((x: unknown) => x)) as ServiceError;
    expect(refused).toBeInstanceOf(ServiceError);
    expect(refused.details).toMatchObject({ reason: 'host_not_allowed', host: 'shop.example.test' });
    expect((await state()).requests['shop.example.test'] ?? 0).toBe(before);
  });

  it("a run's start bound ends its wait for a page, and a run refused once it has its page reaches no website; the page goes to the next run", async () => {
    const state = async () => (await fetch(`${sites.origin}/__demo/state`).then((r) => r.json())) as { requests: Record<string, number> };
    const books: Recipe = { engine: 'browser', hosts: ['books.example.test'], steps: [{ type: 'navigate', url: 'http://books.example.test/' }], output: null };
    // Both pages held by slow reads.
    await fetch(`${sites.origin}/__demo/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ host: 'news.example.test', path_prefix: '/', latency_ms: 2500, times: 2 }) });
    const newsBefore = (await state()).requests['news.example.test'] ?? 0;
    const holders = [run(headline), run(headline)];
    await expect.poll(async () => (await state()).requests['news.example.test'] ?? 0, { timeout: 10_000 }).toBeGreaterThanOrEqual(newsBefore + 2);
    const before = (await state()).requests['books.example.test'] ?? 0;
    const never = new AbortController().signal;
    // Waiting for a page when its start bound passes: gives up at once, never asked to begin.
    let asked = 0;
    const bound = new AbortController();
    setTimeout(() => bound.abort(), 300);
    const t0 = Date.now();
    const gaveUp = (await pool.run(parseRecipe(books), {}, ctx({ signal: never, startSignal: bound.signal, beforeSite: () => void asked++ }), never).catch((x: unknown) => x)) as ServiceError;
    expect(gaveUp).toBeInstanceOf(ServiceError);
    expect(gaveUp.code).toBe('execution_timeout');
    expect(Date.now() - t0).toBeLessThan(1_500);
    expect(asked).toBe(0);
    // Gets a page once a holder is done, and is then refused (its bound passed meanwhile, say).
    const tooLate = new ServiceError('execution_timeout', 'too late to begin');
    const refused = await pool.run(parseRecipe(books), {}, ctx({ signal: never, beforeSite: () => { asked++; throw tooLate; } }), never).catch((x: unknown) => x);
    expect(refused).toBe(tooLate);
    expect(asked).toBe(1);
    expect((await state()).requests['books.example.test'] ?? 0).toBe(before);
    await Promise.all(holders);
    // The refused run's page went back: the next run gets one and reaches the site.
    expect(await run(headline)).toBe('Coastal towns vote to share flood defence costs');
    await pool.run(parseRecipe(books), {}, ctx({ signal: never, beforeSite: () => void asked++ }), never);
    expect(asked).toBe(2);
    expect((await state()).requests['books.example.test'] ?? 0).toBeGreaterThan(before);
  });

  it('bounds concurrency', async () => {
    await fetch(`${sites.origin}/__demo/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ host: 'news.example.test', path_prefix: '/', latency_ms: 600, times: 4 }) });
    const started = Date.now();
    await Promise.all([run(headline), run(headline), run(headline), run(headline)]);
    // 4 runs of ≥600 ms each, 2 at a time
    expect(Date.now() - started).toBeGreaterThanOrEqual(1150);
  });
});
