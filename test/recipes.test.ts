// Unit tests of the recipe language: validation with precise issues, templates and value parsing.
import { afterAll, describe, expect, it } from 'vitest';
import { RecipeValidationError, parseRecipe, safeParseRecipe, recipePerformsActions } from '../shared/recipes/schema.ts';
import { TemplateError, renderUrl, renderValue, renderHeader, type TemplateScope } from '../shared/recipes/template.ts';
import * as cheerio from 'cheerio';
import { ExtractionError, MAX_TEXT, extractHtmlObject, extractJsonObject, loadHtml, normalizeText, parseDate, parseDateTime, parseInteger, parseNumber } from '../activities/engines/extract.ts';
import { ServiceError } from '../shared/errors.ts';
import { guardedLookup, isPrivateAddress } from '../activities/engines/net-guard.ts';
import { linearExtract, linearTest, toRe2 } from '../shared/regex.ts';
import { proxyTarget } from '../activities/engines/guarded-proxy.ts';
import { demoCatalog } from '../shared/catalog/demo/index.ts';
import { recipeActions, validateOperationVersion } from '../shared/catalog/validate.ts';
import { publishApi } from '../shared/db/catalog.ts';
import { closeDb, db } from './helpers/stack.ts';

const ok = {
  engine: 'http',
  hosts: ['books.example.test'],
  steps: [
    { type: 'navigate', url: 'http://books.example.test/search?q={{input.q}}' },
    { type: 'extract', fields: { titles: { type: 'list', selector: '.title', item: { type: 'text' } } }, save_as: 'page' },
  ],
  output: { titles: '{{vars.page.titles}}' },
};

function issues(recipe: unknown): string[] {
  const r = safeParseRecipe(recipe);
  return r.ok ? [] : r.issues.map((i) => `${i.path}: ${i.message}`);
}

describe('recipe validation', () => {
  it('accepts every demo recipe and a JSON string', () => {
    for (const api of demoCatalog) for (const op of api.operations) for (const v of op.versions) expect(() => parseRecipe(v.recipe)).not.toThrow();
    expect(parseRecipe(JSON.stringify(ok)).engine).toBe('http');
  });

  it('reports precise issues', () => {
    expect(issues({ ...ok, engine: 'curl' })[0]).toMatch(/^engine: /);
    expect(issues({ ...ok, extra: 1 })[0]).toMatch(/extra/);
    expect(issues({ ...ok, steps: [{ type: 'click', selector: 'a' }] })).toContain('steps[0].type: step type "click" needs engine "browser"');
    expect(issues({ ...ok, steps: [{ type: 'navigate', url: 'http://other.example.test/' }] })).toContain('steps[0].url: host "other.example.test" is not listed in "hosts"');
    expect(issues({ ...ok, steps: [{ type: 'navigate', url: 'ftp://books.example.test/' }] })[0]).toMatch(/steps\[0\]\.url: url must start with http/);
    expect(issues({ ...ok, output: '{{input.q | upper}}' })[0]).toMatch(/^output: invalid template reference/);
    expect(issues({ ...ok, output: '{{process.env.HOME}}' })[0]).toMatch(/^output: invalid template reference/);
    expect(issues({ ...ok, steps: [{ type: 'navigate', url: 'http://books.example.test/{{secrets.KEY}}' }] })).toContain('steps[0].url: secret "KEY" is used but not listed in "secrets"');
    expect(issues({ ...ok, secrets: ['KEY'], output: '{{secrets.KEY}}' })).toContain('output: the output must never contain secrets');
    expect(issues({ ...ok, steps: [{ type: 'extract', fields: { x: { type: 'list', selector: 'li' } }, save_as: 'v' }] })[0]).toMatch(/steps\[0\]\.fields\.x\.fields: type "list" needs exactly one/);
    expect(issues({ ...ok, steps: [{ type: 'extract', fields: { x: { type: 'text', pattern: '(' } }, save_as: 'v' }] })[0]).toMatch(/pattern: not a regular expression this service can run/);
    // Patterns run on the linear-time engine: lookaround and backreferences are refused.
    expect(issues({ ...ok, steps: [{ type: 'extract', fields: { x: { type: 'text', pattern: '(?<=\\$)\\d+' } }, save_as: 'v' }] })[0]).toMatch(/lookaround and backreferences are not supported/);
    expect(issues({ ...ok, steps: [{ type: 'request', url: 'http://books.example.test/', json: { a: 1 } }] })[0]).toMatch(/method: a request with a body needs method/);
    expect(issues({ ...ok, steps: [{ type: 'extract', fields: {}, save_as: 'bad name' }] })[0]).toMatch(/save_as: must be a variable name/);
    expect(issues({ ...ok, hosts: ['Books.Example.test:80'] })[0]).toMatch(/^hosts\[0\]: must be a lower-case host name/);
  });

  it('refuses a Host header and the connection\'s own headers, in any letter case, wherever the request is', () => {
    const request = (headers: Record<string, string>) => ({ type: 'request', url: 'http://books.example.test/', headers });
    // Host would send the request (and its secrets) to another site at the URL host's address.
    expect(issues({ ...ok, steps: [request({ Host: 'evil.example.test', accept: 'text/html' })] })).toEqual([
      `steps[0].headers.Host: the host header cannot be set by a recipe: the engine sends the request to the URL's host and manages the connection itself`,
    ]);
    const names = ['host', 'HOST', 'Connection', 'keep-alive', 'Transfer-Encoding', 'TE', 'trailer', 'Upgrade', 'HTTP2-Settings', 'content-length', 'Expect', 'Proxy-Authorization', 'proxy-connection'];
    for (const name of names) expect(issues({ ...ok, steps: [request({ [name]: 'x' })] }), name).toEqual([expect.stringMatching(new RegExp(`^steps\\[0\\]\\.headers\\.${name}: the ${name.toLowerCase()} header cannot be set by a recipe`))]);
    const paginated = { type: 'paginate', steps: [request({ host: 'x' })], collect: 'p', save_as: 'all', limit: 1, next: { kind: 'counter' } };
    expect(issues({ ...ok, steps: [paginated] })).toEqual([expect.stringMatching(/^steps\[0\]\.steps\[0\]\.headers\.host: the host header cannot be set/)]);
    // Headers that only ask something of the site are the recipe's, as before.
    expect(issues({ ...ok, steps: [request({ Authorization: 'Bearer x', 'X-Api-Key': 'k', Accept: 'application/json', Cookie: 'a=b', Origin: 'http://books.example.test', 'X-Hostname': 'h' })] })).toEqual([]);
  });

  it('throws RecipeValidationError listing the issues', () => {
    try {
      parseRecipe({ engine: 'http' });
      throw new Error('should throw');
    } catch (e) {
      expect(e).toBeInstanceOf(RecipeValidationError);
      expect((e as RecipeValidationError).issues.map((i) => i.path)).toEqual(expect.arrayContaining(['hosts', 'steps', 'output']));
    }
  });

  it('knows which recipes perform actions', () => {
    expect(recipePerformsActions(parseRecipe(ok))).toBe(false);
    expect(recipePerformsActions(parseRecipe({ ...ok, steps: [{ ...ok.steps[0], action: true }] }))).toBe(true);
  });
});

describe('templates', () => {
  const scope: TemplateScope = { input: { q: 'a b&c/d?e#f', n: 3, list: [1, 2] }, vars: { v: { x: [{ y: 'deep' }] } }, secrets: { KEY: 'sekret' }, run: { request_ref: 'req_1' } };

  it('URL-encodes inserted values but keeps the literal URL', () => {
    expect(renderUrl('http://h.test/s?q={{input.q}}&n={{input.n}}', scope)).toBe('http://h.test/s?q=a%20b%26c%2Fd%3Fe%23f&n=3');
    expect(renderUrl('{{vars.v.x[0].y}}', scope)).toBe('deep');
  });

  it('keeps JSON types for a lone placeholder and interpolates strings', () => {
    expect(renderValue({ a: '{{input.list}}', b: 'n={{input.n}}', c: '{{vars.v.x[0].y}}', d: '{{input.missing}}', e: '{{input.list.length}}' }, scope)).toEqual({ a: [1, 2], b: 'n=3', c: 'deep', e: 2 });
  });

  it('never evaluates: prototype and constructor lookups yield nothing', () => {
    expect(renderValue('{{input.constructor}}', scope)).toBeUndefined();
    expect(renderValue('{{input.__proto__}}', scope)).toBeUndefined();
  });

  it('strips CR/LF from headers and reports missing secrets', () => {
    expect(renderHeader('x {{input.q}}\r\nInjected: 1', { ...scope, input: { q: 'v' } })).toBe('x vInjected: 1');
    expect(() => renderValue('{{secrets.OTHER}}', scope)).toThrow(TemplateError);
  });
});

describe('value parsing', () => {
  it('numbers, integers and dates', () => {
    expect(parseNumber('£12.99')).toBe(12.99);
    expect(parseNumber('$1,234.50 incl. VAT')).toBe(1234.5);
    expect(parseNumber('−3 °C')).toBe(-3);
    expect(parseNumber('n/a')).toBeNull();
    expect(parseInteger('Showing 1,234 results')).toBe(1234);
    expect(parseDate('11 April 2019')).toBe('2019-04-11');
    expect(parseDate('2019-04-11T23:30:00Z')).toBe('2019-04-11');
    expect(parseDateTime('2025-06-01T12:00:00Z')).toBe('2025-06-01T12:00:00Z');
    expect(parseDateTime('2025-06-01 08:15')).toBe('2025-06-01T08:15:00Z');
    expect(parseDateTime('2025-06-01T12:00:00+02:00')).toBe('2025-06-01T10:00:00Z');
  });

  it('a value that doubles at every set step (shared references) or every string render stops at the bound, at once', () => {
    const scope: TemplateScope = { input: {}, vars: { v0: 'x' }, secrets: {}, run: {} };
    const started = Date.now();
    let failedAt = -1;
    for (let i = 1; i <= 60; i++) {
      try {
        // What `set` does with value ["{{vars.v<i-1>}}", "{{vars.v<i-1>}}"]: two references, no copy.
        scope.vars[`v${i}`] = renderValue([`{{vars.v${i - 1}}}`, `{{vars.v${i - 1}}}`], scope);
      } catch (e) {
        expect(e).toMatchObject({ code: 'workflow_execution_failed', details: { reason: 'value_too_large' } });
        failedAt = i;
        break;
      }
    }
    expect(failedAt).toBeGreaterThan(10);
    expect(failedAt).toBeLessThanOrEqual(20);
    const strings: TemplateScope = { input: {}, vars: { s0: 'xxxxxxxx' }, secrets: {}, run: {} };
    expect(() => {
      for (let i = 1; i <= 60; i++) strings.vars[`s${i}`] = renderValue(`{{vars.s${i - 1}}}{{vars.s${i - 1}}}`, strings);
    }).toThrow(/larger than/);
    // Serializing a shared value into a string (a URL, a header, a message) is bounded too.
    let dag: unknown = 'x';
    for (let i = 0; i < 40; i++) dag = [dag, dag];
    expect(() => renderValue('x{{vars.dag}}', { input: {}, vars: { dag }, secrets: {}, run: {} })).toThrow(/larger than/);
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  it('patterns run on the linear-time engine with ECMAScript escapes translated', () => {
    expect(linearExtract('\\u00e9(\\d+)', 'caf\u00e942')).toBe('42');
    expect(linearExtract('\\u{1F600}', 'x\u{1F600}')).toBe('\u{1F600}');
    expect(linearExtract('Showing ([\\d,]+) results', 'Showing 1,234 results')).toBe('1,234');
    expect(linearExtract('^(a+)+$', `${'a'.repeat(50_000)}!`)).toBeNull();
    expect(linearTest('^97[89][0-9]{10}$', '9782918455943')).toBe(true);
    expect(toRe2('\\\\u0041')).toBe('\\\\u0041'); // an escaped backslash, then "u0041": kept
  });

  it('private address ranges', () => {
    for (const ip of ['127.0.0.1', '10.0.0.1', '172.16.5.4', '192.168.1.1', '169.254.169.254', '100.64.0.1', '192.88.99.1', '0.0.0.0', '::1', 'fe80::1', 'fd00::1', '::ffff:127.0.0.1', '::ffff:7f00:1'])
      expect(isPrivateAddress(ip), ip).toBe(true);
    // IPv6 spellings that carry a private IPv4 address (compatible, mapped in any spelling, translated,
    // NAT64, 6to4) and prefixes that reach IPv4 hosts by other means (local-use NAT64, Teredo).
    for (const ip of ['::', '::7f00:1', '::127.0.0.1', '0:0:0:0:0:ffff:7f00:1', '::ffff:0:a00:1', '64:ff9b::7f00:1', '64:ff9b:0:0:0:0:a9fe:a9fe', '64:ff9b:1::808:808', '2002:7f00:1::1', '2002:a9fe:a9fe::', '2001:0:4136:e378:8000:63bf:3fff:fdd2', 'fe80::1%eth0'])
      expect(isPrivateAddress(ip), ip).toBe(true);
    for (const ip of ['93.184.216.34', '8.8.8.8', '2606:4700::1111', '::ffff:808:808', '64:ff9b::808:808', '2002:808:808::1', '2a00:1450:4009:81f::200e'])
      expect(isPrivateAddress(ip), ip).toBe(false);
  });
});

describe('HTML parsed in slices', () => {
  // Every construct whose tokens a slice boundary can cut: a doctype, entities (named, numeric, without
  // their semicolon), CRLF, a surrogate pair, comments, raw text (script, style, textarea, title),
  // attributes in every quoting, tables that need implied elements, a template, a misnested tag.
  const tricky =
    '<!DOCTYPE html>\r\n<html><head><title>A &amp; B &lt;c&gt;</title><style>p > a { x: "</p>" }</style>' +
    '<script>var s = "</div>" + \'<!--\' + "&amp;";</script></head><body>\r\n' +
    '<p class=x id="a" data-y=\'b\' hidden>caf&eacute; &#233; &#x1F600; 😀 &notit; &copy</p><!-- a -- comment -->' +
    '<table><tr><td>1<td>2</table><textarea>a <b> &amp; </textarea><template><i>t</i></template>' +
    '<b><i>mis</b>nested</i><select><option>o<option>p</select></body></html>';

  it('makes the same document as one parse, wherever the slices fall', async () => {
    const whole = cheerio.load(tricky).html();
    for (const slice of [1, 2, 3, 4, 5, 7, 11, 16, 64, 1024]) {
      expect((await loadHtml(tricky, undefined, slice)).html(), `slices of ${slice}`).toBe(whole);
    }
  });

  it('stops between slices once the run has ended', async () => {
    const ended = new AbortController();
    ended.abort(new Error('run ended'));
    await expect(loadHtml(tricky, ended.signal, 16)).rejects.toThrow('run ended');
  });
});

describe('reading text and markup within the work budget', () => {
  const opts = { resolveLimit: (n: number | string) => Number(n) };

  it('text, html and json fields read what cheerio reads, text cut at MAX_TEXT characters', async () => {
    // Text split over many nodes and levels past the cut (which falls inside a surrogate pair),
    // comments, raw text, a template's content, CDATA in SVG, entities and escapes, ld+json.
    const long = `<div id="long">${'<p>ab&amp;c 😀 \n\t d</p><!-- x -->'.repeat(1_500)}<b>${'😀'.repeat(6_000)}</b></div>`;
    const doc =
      '<!DOCTYPE html><html><head><title>A &amp; B</title><style>p > a { x: "</p>" }</style>' +
      '<script type="application/ld+json">{"@type": "Book", "name": "A <b> & B"}</script></head><body>' +
      '<p class=x data-y=\'"q" &amp; \u00a0\'>caf&eacute;&nbsp;&#x1F600; <i>it</i><br>tail</p><template><i>t</i>in</template>' +
      '<svg><![CDATA[cd<a>]]><title>t</title></svg><textarea>a <b> &amp;</textarea><noscript><b>n</b></noscript>' +
      `<table><tr><td>1<td>2</table>${long}<pre>\nx</pre></body></html>`;
    const $ = await loadHtml(doc);
    const c = cheerio.load(doc);
    expect(c('#long').text().length).toBeGreaterThan(MAX_TEXT);
    const nodes = [$.root()[0]!, ...$('*').toArray()];
    const theirs = [c.root()[0]!, ...c('*').toArray()];
    expect(nodes.length).toBe(theirs.length);
    nodes.forEach((node, i) => {
      const them = c(theirs[i]!);
      const got = extractHtmlObject($, $(node), { t: { type: 'text' }, h: { type: 'html' }, j: { type: 'json' } }, opts);
      let json: unknown = null;
      try {
        json = JSON.parse(them.text());
      } catch {}
      expect(got, `element ${i}`).toEqual({ t: normalizeText(them.text().slice(0, MAX_TEXT)), h: them.html() ?? '', j: json });
    });
    expect(extractHtmlObject($, null, { p: { type: 'list', selector: 'p', item: { type: 'text' } } }, opts)).toEqual({
      p: c('p').toArray().map((p) => normalizeText(c(p).text().slice(0, MAX_TEXT))),
    });
  });

  // 500 nested elements (under the 512 bound) over 100 KB of text: each element's text and markup
  // hold the whole text. Listed as items, cheerio built each text anew at every level: 13 s.
  const nested = `<html><body>${'<div>a'.repeat(500)}${'x'.repeat(100_000)}</body></html>`;

  it('a list of 500 nested elements over 100 KB of text reads at most MAX_TEXT characters of each, at once', async () => {
    const $ = await loadHtml(nested);
    const started = performance.now();
    const { items } = extractHtmlObject($, null, { items: { type: 'list', selector: 'div', item: { type: 'text' } } }, opts) as { items: string[] };
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(items).toHaveLength(500);
    expect(items[0]).toBe(('a'.repeat(500) + 'x'.repeat(MAX_TEXT)).slice(0, MAX_TEXT));
    expect(items[499]).toBe('a' + 'x'.repeat(MAX_TEXT - 1));
  });

  it('their markup, or their text read whole as json, ends the extraction at the work budget, at once', async () => {
    for (const type of ['html', 'json'] as const) {
      const $ = await loadHtml(nested);
      const started = performance.now();
      let error: unknown;
      try {
        extractHtmlObject($, null, { items: { type: 'list', selector: 'div', item: { type } } }, opts);
      } catch (e) {
        error = e;
      }
      expect(performance.now() - started, type).toBeLessThan(1_000);
      expect(error, type).toBeInstanceOf(ExtractionError);
      expect((error as Error).message).toMatch(/^reading the (markup|text) of the elements matched needs more work than a page may take \(20,000,000 steps a page/);
    }
  });
});

describe("a website's JSON read as a field's text", () => {
  it("nested 20,000 deep, is the website's document_too_complex, not a stack overflow", () => {
    const deep = JSON.parse(`{"list":${'['.repeat(20_000)}1${']'.repeat(20_000)}}`);
    let error: unknown;
    try {
      extractJsonObject(deep, { t: { type: 'text', pointer: '/list' } }, { resolveLimit: Number });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ServiceError);
    expect(error).toMatchObject({ code: 'upstream_http_error', details: { reason: 'document_too_complex' } });
  });
});

describe('performs_actions is derived from the recipe', () => {
  const base = { engine: 'http', hosts: ['shop.example.test'], output: null } as const;
  const nav = { type: 'navigate', url: 'http://shop.example.test/' } as const;

  it('is true exactly when a step (also inside paginate) is marked action', () => {
    expect(recipeActions(parseRecipe({ ...base, steps: [nav] })).performsActions).toBe(false);
    expect(recipeActions(parseRecipe({ ...base, steps: [nav, { type: 'request', method: 'POST', url: 'http://shop.example.test/o', action: true }] })).performsActions).toBe(true);
    const nested = { type: 'paginate', collect: 'p.items', save_as: 'all', limit: 10, max_pages: 2, next: { kind: 'counter' }, steps: [{ ...nav, action: true }] };
    expect(recipeActions(parseRecipe({ ...base, steps: [nested] })).performsActions).toBe(true);
  });

  it('agrees with every demo operation, and the seed validator accepts the demo catalog', () => {
    for (const api of demoCatalog)
      for (const op of api.operations) for (const v of op.versions) expect(() => validateOperationVersion(v.recipe, op), `${api.handle} ${op.name}`).not.toThrow();
  });

  it('refuses a declared flag that disagrees with the recipe, both ways', () => {
    const shop = demoCatalog.find((a) => a.handle === '@shop')!;
    const order = shop.operations.find((o) => o.performs_actions)!;
    const lying = { ...order, performs_actions: false };
    expect(() => validateOperationVersion(order.versions[0]!.recipe, lying)).toThrow(RecipeValidationError);
    const reader = shop.operations.find((o) => !o.performs_actions)!;
    const overclaiming = { ...reader, performs_actions: true };
    try {
      validateOperationVersion(reader.versions[0]!.recipe, overclaiming);
      throw new Error('expected a refusal');
    } catch (e) {
      expect(e).toBeInstanceOf(RecipeValidationError);
      expect((e as RecipeValidationError).issues[0]).toMatchObject({ path: 'performs_actions' });
    }
  });

  it('refuses an unmarked PUT, PATCH or DELETE request', () => {
    const r = { ...base, steps: [{ type: 'request', method: 'DELETE', url: 'http://shop.example.test/cart' }] };
    expect(() => validateOperationVersion(r)).toThrow(/mark it `action: true`/);
    expect(() => validateOperationVersion({ ...r, steps: [{ ...r.steps[0], action: true }] })).not.toThrow();
  });

  it('the seed path refuses a demo API whose flag is wrong and writes nothing', async () => {
    const shop = demoCatalog.find((a) => a.handle === '@shop')!;
    const handle = `@wrong-flag-${Math.random().toString(36).slice(2, 8)}`;
    const wrong = { ...shop, handle, operations: shop.operations.map((o) => ({ ...o, performs_actions: false })) };
    await expect(publishApi(db(), wrong, { validateRecipe: validateOperationVersion })).rejects.toThrow(/performs_actions/);
    const rows = await db().query('SELECT 1 FROM apis WHERE handle = $1', [handle]);
    expect(rows.rowCount).toBe(0);
    // the same API with its true flags is accepted (so the refusal above is about the flag)
    await publishApi(db(), { ...shop, handle }, { validateRecipe: validateOperationVersion });
    expect((await db().query('SELECT 1 FROM apis WHERE handle = $1', [handle])).rowCount).toBe(1);
  });
});

afterAll(() => closeDb());

describe('the browser proxy decides each connection', () => {
  const opts = { hostMap: { 'books.example.test': '127.0.0.1:4100' }, allowPrivateNetwork: false, allowedHosts: new Set(['books.example.test', 'api.example.com', '10.0.0.7']) };
  it('maps demo hosts, pins other names to the checked lookup, refuses private and undeclared destinations', () => {
    expect(proxyTarget(opts, 'books.example.test', 80)).toEqual({ host: '127.0.0.1', port: 4100 });
    // a public name is connected through the lookup that checks the address it connects to
    expect(proxyTarget(opts, 'API.example.com.', 443)).toMatchObject({ host: 'api.example.com', port: 443, lookup: guardedLookup });
    expect(proxyTarget(opts, '10.0.0.7', 80)).toEqual({ host: '10.0.0.7', reason: 'destination_refused' });
    expect(proxyTarget(opts, '[::ffff:127.0.0.1]', 80)).toEqual({ host: '::ffff:127.0.0.1', reason: 'destination_refused' });
    expect(proxyTarget(opts, 'localhost', 80)).toEqual({ host: 'localhost', reason: 'destination_refused' });
    expect(proxyTarget(opts, 'news.example.test', 80)).toEqual({ host: 'news.example.test', reason: 'host_not_allowed' });
  });
});
