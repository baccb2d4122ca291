// Routes and their document agree, and every way of missing a route answers the envelope:
// - every documented method + path is routed on the running API, and every route is documented
//   (except the allow-list below), so the document cannot drift from the code;
// - any method a path does not take is 405 with Allow (also methods Node or Fastify do not know),
//   unknown paths 404, OPTIONS 204 with Allow, HEAD wherever GET is;
// - hostile catalog parameters and cursors are 400 invalid_input naming the param, never 500;
// - with PostgreSQL unreachable, the catalog, tools, icons and request-status routes are 503 with
//   Retry-After (an API process of our own pointed at a port where nothing listens).
import net from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../apps/api/app.ts';
import { isDatabaseUnavailable } from '../shared/db/unavailable.ts';
import { loadConfig } from '../shared/config.ts';
import { createPool, type Db } from '../shared/db/pool.ts';
import { startApiProcess, type ServiceProcess } from './helpers/processes.ts';
import { call, closeDb, newOrg, ownPair, stack } from './helpers/stack.ts';

/**
 * Routes that are not operations of the API, hence not in the document:
 * - HEAD: Fastify answers HEAD wherever GET is (exposeHeadRoutes); the document says so once.
 * - /docs/assets/:file: the static files of the reference page (swagger-ui), not an API.
 * - /console and /console/*: the web console's HTML pages and forms (cookie sessions, CSRF), for
 *   people in a browser; not part of the HTTP contract, which takes only API keys
 *   (apps/api/console/README.md). test/console-*.test.ts cover them.
 */
const UNDOCUMENTED = (r: { method: string; url: string }) =>
  r.method === 'HEAD' || r.url === '/docs/assets/:file' || r.url === '/console' || r.url.startsWith('/console/');

/** Sample values for path parameters: well-formed, so a request reaches the handler. */
const SAMPLE_PARAMS: Record<string, string> = { request_id: 'req_routes_test_0001', sha256: '0'.repeat(64), workflow_name: 'weather', file: 'init.js' };
const toDocPath = (url: string) => url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
const fill = (docPath: string) => docPath.replace(/\{([A-Za-z0-9_]+)\}/g, (_, name: string) => SAMPLE_PARAMS[name] ?? 'x');

let app: FastifyInstance;
let appDb: Db;
let doc: any;
let org: Awaited<ReturnType<typeof newOrg>>;

beforeAll(async () => {
  // The same app as the running API, built in-process only to read its route table.
  appDb = createPool(stack().databaseUrl, 2);
  app = await buildApp({
    config: { ...loadConfig(), LOG_LEVEL: 'silent' },
    db: appDb,
    temporal: async () => {
      throw new Error('not used');
    },
    temporalHealthy: async () => false,
    baseUrl: () => stack().baseUrl,
  });
  await app.ready();
  doc = (await call('GET', '/openapi.json')).body;
  org = await newOrg(5);
}, 120_000);
afterAll(async () => {
  await app?.close();
  await appDb?.end();
  await closeDb();
});

/** A raw HTTP/1.1 exchange: any method, even ones fetch() refuses or Node's client does not know. */
function raw(method: string, path: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: Record<string, string>; body: any; text: string }> {
  const url = new URL(stack().baseUrl);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(url.port), url.hostname, () => {
      const lines = [`${method} ${path} HTTP/1.1`, `host: ${url.host}`, 'connection: close', ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
      socket.write(`${lines.join('\r\n')}\r\n\r\n`);
    });
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (c: string) => (data += c));
    socket.on('error', reject);
    socket.on('close', () => {
      const [head = '', ...rest] = data.split('\r\n\r\n');
      const [statusLine = '', ...headerLines] = head.split('\r\n');
      const hs = Object.fromEntries(headerLines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      let text = rest.join('\r\n\r\n');
      if (hs['transfer-encoding'] === 'chunked') text = text.replace(/^[0-9a-f]+\r\n/, '').replace(/\r\n0\r\n\r\n$/, '').replace(/\r\n$/, '');
      let body: any;
      try {
        body = JSON.parse(text);
      } catch {
        body = undefined;
      }
      resolve({ status: Number(statusLine.split(' ')[1]), headers: hs, body, text });
    });
  });
}

function expectEnvelope(res: { status: number; body: any }, status: number, code: string, param?: string) {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  expect(res.body).toMatchObject({ success: false, error: { code, status } });
  expect(res.body.error.doc_url).toMatch(new RegExp(`/docs/errors#${code}$`));
  if (param !== undefined) expect(res.body.error.param).toBe(param);
}

describe('the document and the routes agree', () => {
  it('every documented method + path is routed on the running API', async () => {
    const ops = Object.entries<any>(doc.paths).flatMap(([path, item]) => Object.keys(item).map((method) => [method.toUpperCase(), path] as const));
    expect(ops.length).toBeGreaterThan(15);
    for (const [method, path] of ops) {
      const res = await call(method, fill(path), method === 'POST' ? { body: {} } : {});
      const what = `${method} ${path} -> ${res.status} ${res.text.slice(0, 200)}`;
      expect(res.status === 404 && res.body?.error?.code === 'route_not_found', what).toBe(false);
      // MCP's GET and DELETE are documented as 405 (a stateless MCP server); they answer 401 first without a key.
      expect(res.status, what).not.toBe(405);
      expect(res.status, what).toBeLessThan(500);
      // The documented security is the real one: keyed operations refuse a request without a key.
      const op = doc.paths[path][method.toLowerCase()];
      if (op.security?.length) expect(res.body?.error?.code, what).toBe('api_key_required');
      else expect(res.status, what).not.toBe(401);
    }
  });

  it('every operation is declared, not merely listed: id, summary, tag, security, a described answer, typed path parameters', () => {
    // @fastify/swagger lists a route without any schema too; this is what makes a bare route fail.
    const ids = new Set<string>();
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(item)) {
        const what = `${method} ${path}`;
        expect(op.operationId, what).toMatch(/^[a-z][A-Za-z0-9]+$/);
        expect(ids.has(op.operationId), `${what}: duplicate operationId`).toBe(false);
        ids.add(op.operationId);
        expect(op.summary, what).toBeTruthy();
        expect(op.tags?.length, what).toBeGreaterThan(0);
        expect(Array.isArray(op.security), `${what}: security [] or bearer`).toBe(true);
        const answers = Object.entries<any>(op.responses).filter(([status, r]) => /^[23]/.test(status) || (status === '405' && !r.$ref));
        expect(answers.length, what).toBeGreaterThan(0);
        for (const [, r] of answers) expect(r.description, what).not.toBe('Default Response');
        for (const p of (op.parameters ?? []).filter((x: any) => x.in === 'path')) expect(p.schema.pattern ?? p.schema.enum, `${what} {${p.name}}`).toBeDefined();
      }
    }
  });

  it('every route is documented, except the commented allow-list', () => {
    const documented = new Set(Object.entries<any>(doc.paths).flatMap(([path, item]) => Object.keys(item).map((m) => `${m.toUpperCase()} ${path}`)));
    const routes = app.routeTable.filter((r) => !UNDOCUMENTED(r)).map((r) => `${r.method} ${toDocPath(r.url)}`);
    expect(routes.length).toBeGreaterThan(15);
    expect(routes.filter((r) => !documented.has(r))).toEqual([]);
    // And the allow-list hides nothing else: each entry is a HEAD, the reference's assets or a console page.
    const isConsole = (url: string) => url === '/console' || url.startsWith('/console/');
    expect(app.routeTable.filter(UNDOCUMENTED).every((r) => r.method === 'HEAD' || r.url.startsWith('/docs/assets/') || isConsole(r.url))).toBe(true);
    expect(app.routeTable.some((r) => r.method === 'POST' && r.url === '/console/sign-in')).toBe(true);
    // The console is not in the document: it is for browsers, not the HTTP contract.
    expect(Object.keys(doc.paths).filter(isConsole)).toEqual([]);
  });
});

describe('methods no route declares', () => {
  // QUERY is routed by Fastify but declared nowhere; PROPFIND/M-SEARCH/TRACE are known to Node but
  // not routed by Fastify; FOO is refused by Node's parser; CONNECT never reaches Fastify.
  const METHODS = ['QUERY', 'PROPFIND', 'M-SEARCH', 'TRACE', 'FOO', 'CONNECT', 'PUT', 'PATCH', 'DELETE'];
  const PATHS: Array<[string, string]> = [
    ['/health', 'GET, HEAD'],
    ['/v1/query', 'POST'],
    ['/v1/catalog', 'GET, HEAD'],
  ];

  it('answer 405 method_not_allowed with Allow on known paths, 404 on unknown ones, never 500', async () => {
    for (const method of METHODS) {
      for (const [path, allow] of PATHS) {
        const res = await raw(method, path);
        expectEnvelope(res, 405, 'method_not_allowed');
        expect(res.headers.allow, `${method} ${path}`).toBe(allow);
      }
      expectEnvelope(await raw(method, '/v1/nowhere'), 404, 'route_not_found');
    }
    // With a body but no Content-Type, QUERY used to fail before routing (500).
    const q = await raw('QUERY', '/v1/catalog', { 'content-length': '0' });
    expectEnvelope(q, 405, 'method_not_allowed');
  });

  it('OPTIONS answers 204 with Allow on known paths and 404 elsewhere; HEAD is answered wherever GET is', async () => {
    const opt = await raw('OPTIONS', '/v1/catalog');
    expect(opt.status).toBe(204);
    expect(opt.headers.allow).toBe('GET, HEAD');
    expect((await raw('OPTIONS', '/v1/query')).headers.allow).toBe('POST');
    expectEnvelope(await raw('OPTIONS', '/v1/nowhere'), 404, 'route_not_found');
    const head = await raw('HEAD', '/health');
    expect(head.status).toBe(200);
    expect(head.text).toBe('');
    const headQuery = await raw('HEAD', '/v1/query');
    expect(headQuery.status).toBe(405);
    expect(headQuery.headers.allow).toBe('POST');
  });
});

describe('slow senders', () => {
  it('a request not received whole within REQUEST_TIMEOUT_MS (headers or body) is 408 request_timeout and its connection closed', async () => {
    const slow = await buildApp({
      config: { ...loadConfig(), LOG_LEVEL: 'silent', REQUEST_TIMEOUT_MS: 1_000 },
      db: appDb,
      temporal: async () => {
        throw new Error('not used');
      },
      temporalHealthy: async () => false,
      baseUrl: () => 'http://127.0.0.1',
    });
    const url = new URL(await slow.listen({ port: 0, host: '127.0.0.1' }));
    try {
      /** Sends `partial`, never the rest; resolves with what the server answered before closing, and after how long. */
      const stall = (partial: string) =>
        new Promise<{ text: string; ms: number }>((resolve, reject) => {
          const started = Date.now();
          const socket = net.connect(Number(url.port), url.hostname, () => socket.write(partial));
          let data = '';
          socket.setEncoding('latin1');
          socket.on('data', (c: string) => (data += c));
          socket.on('error', reject);
          socket.on('close', () => resolve({ text: data, ms: Date.now() - started }));
          setTimeout(() => socket.destroy(new Error('no answer within 10 s')), 10_000).unref();
        });
      const head = 'POST /v1/query HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n';
      // The body case with a key (without one the answer is 401 before the body is read), on a
      // query and on an upload.
      const upload = `POST /v1/files HTTP/1.1\r\nhost: x\r\ncontent-type: application/octet-stream\r\nx-file-name: a.txt\r\nauthorization: Bearer ${org.api_key}\r\ncontent-length: 100\r\n\r\nhello`;
      for (const partial of [head, `${head}authorization: Bearer ${org.api_key}\r\ncontent-length: 100\r\n\r\n{"api":`, upload]) {
        const r = await stall(partial);
        expect(r.text).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
        const body = JSON.parse(r.text.slice(r.text.indexOf('\r\n\r\n') + 4));
        expect(body).toMatchObject({ success: false, error: { code: 'request_timeout', status: 408, retryable: true } });
        expect(r.ms).toBeGreaterThanOrEqual(1_000);
        expect(r.ms).toBeLessThan(5_000);
      }
    } finally {
      await slow.close();
    }
  });
});

describe('hostile catalog parameters and cursors', () => {
  const items = async (qs: string) => {
    const r = await call('GET', `/v1/catalog?${qs}`);
    expect(r.status, `${qs}: ${r.text.slice(0, 300)}`).toBe(200);
    return r.body.data.items as Array<{ api: string; operations: Array<{ cost_credits: number }> }>;
  };

  it('max_cost_credits is a number: fractions filter by cost <= value, huge means no limit, bad values are 400', async () => {
    const all = await items('limit=100');
    expect(all.length).toBeGreaterThan(1);
    const costs = all.flatMap((i) => i.operations.map((o) => o.cost_credits));
    const half = await items('limit=100&max_cost_credits=0.5');
    expect(half.every((i) => i.operations.length > 0 && i.operations.every((o) => o.cost_credits <= 0.5))).toBe(true);
    expect(half.flatMap((i) => i.operations).length).toBe(costs.filter((c) => c <= 0.5).length);
    const atOne = await items('limit=100&max_cost_credits=1.5');
    expect(atOne.flatMap((i) => i.operations).length).toBe(costs.filter((c) => c <= 1.5).length);
    for (const huge of ['1e308', '1e309', '99999999999999999999999']) expect((await items(`limit=100&max_cost_credits=${huge}`)).map((i) => i.api), huge).toEqual(all.map((i) => i.api));
    for (const bad of ['-1', 'NaN', '', 'abc', '-0.5', '1e308e3']) {
      expectEnvelope(await call('GET', `/v1/catalog?max_cost_credits=${bad}`), 400, 'invalid_input', 'max_cost_credits');
    }
  });

  const decode = (c: string) => JSON.parse(Buffer.from(c, 'base64url').toString('utf8'));
  const encode = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');

  it('tampered, out-of-range and far-future cursors are 400 param cursor on every sort', async () => {
    for (const sort of ['updated', 'popular', 'newest']) {
      const first = await call('GET', `/v1/catalog?limit=1&sort=${sort}`);
      const cursor = first.body.data.next_cursor as string;
      expect(cursor, sort).toBeTruthy();
      expect((await call('GET', `/v1/catalog?limit=1&sort=${sort}&cursor=${cursor}`)).status).toBe(200);
      const c = decode(cursor);
      const variants = [
        { ...c, k: '99999999999999999999' }, // 20 digits: past bigint
        { ...c, k: '-99999999999999999999' },
        { ...c, k: typeof c.k === 'string' ? 1.5 : '12' }, // the other sort's key type
        { ...c, k: null },
        { ...c, i: 1e30 },
        { ...c, t: Date.now() + 10 * 365 * 86_400_000 }, // far future "as of" (popular)
        { ...c, t: 1e20 },
        { ...c, v: 2 },
        [c],
        null,
        'x',
      ].filter((v) => sort === 'popular' || !(v && typeof v === 'object' && 't' in v && v.t !== c.t));
      for (const v of variants) {
        const res = await call('GET', `/v1/catalog?limit=1&sort=${sort}&cursor=${encode(v)}`);
        expectEnvelope(res, 400, 'invalid_input', 'cursor');
      }
      for (const junk of [`x${cursor}`, cursor.slice(0, -3), '%00', 'eyJ2IjoxfQ', 'a'.repeat(2000)]) {
        expectEnvelope(await call('GET', `/v1/catalog?limit=1&sort=${sort}&cursor=${encodeURIComponent(junk)}`), 400, 'invalid_input', 'cursor');
      }
    }
  });

  it('tools cursors out of range are 400 param cursor', async () => {
    for (const cursor of ['99999999999999999999', '12345678901234567', '-1', '1e5', '0x10']) {
      expectEnvelope(await call('GET', `/v1/catalog/tools?cursor=${cursor}`, { key: org.api_key }), 400, 'invalid_input', 'cursor');
    }
    expect((await call('GET', '/v1/catalog/tools?cursor=9999999999999999', { key: org.api_key })).body.data).toEqual({ items: [], next_cursor: null });
  });

  it('paths that are not valid percent-encoding or carry an over-long parameter are 400 in the envelope', async () => {
    expectEnvelope(await raw('GET', '/v1/icons/%E0%A4%A'), 400, 'invalid_input');
    expectEnvelope(await raw('GET', `/v1/icons/${'a'.repeat(300)}`), 400, 'invalid_input');
    expectEnvelope(await raw('GET', `/v1/query/requests/req_${'a'.repeat(200)}`), 400, 'invalid_input');
    for (const res of [await raw('GET', '/v1/icons/%E0%A4%A'), await raw('GET', `/v1/icons/${'a'.repeat(300)}`)]) {
      expect(res.body.error).not.toHaveProperty('param');
      expect(res.body.error.details.issues).toEqual([{ path: '', message: res.body.error.message }]);
    }
  });

  it('a request Node cannot parse is 400 in the envelope, details.issues included (the request as a whole: path \'\', no param)', async () => {
    // A space inside a header name is not HTTP; nor is a header line without a colon.
    for (const headers of [{ 'bad name': 'x' }, { 'x-ok': 'y\r\nno-colon-here' }] as Array<Record<string, string>>) {
      const res = await raw('GET', '/v1/catalog/categories', headers);
      expectEnvelope(res, 400, 'invalid_input');
      expect(res.body.error).not.toHaveProperty('param');
      expect(res.body.error.details.issues).toEqual([{ path: '', message: 'The request is not valid HTTP' }]);
    }
  });

  it('reference assets named after Object.prototype members are 404, not 500', async () => {
    for (const name of ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf']) {
      expectEnvelope(await call('GET', `/docs/assets/${name}`), 404, 'route_not_found');
    }
  });

  it('route schemas answer the envelope with the dotted param and details.issues', async () => {
    const bad = await call('GET', '/v1/query/requests/nope', { key: org.api_key });
    expectEnvelope(bad, 400, 'invalid_input', 'request_id');
    expect(bad.body.error.details.issues).toEqual([expect.objectContaining({ path: 'request_id' })]);
    const two = await call('GET', '/v1/catalog?colour=red&size=9');
    expectEnvelope(two, 400, 'invalid_input', 'colour');
    expect(two.body.error.details.issues.map((i: { path: string }) => i.path)).toEqual(['colour', 'size']);
    // The key is checked before the parameters.
    expectEnvelope(await call('GET', '/v1/catalog/tools?cursor=abc'), 401, 'api_key_required');
  });
});

describe('PostgreSQL unavailable', () => {
  it('classifies connection failures and unavailability SQLSTATEs, not query bugs', () => {
    for (const err of [
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' }),
      new AggregateError([Object.assign(new Error('x'), { code: 'ECONNREFUSED' })], ''),
      new Error('timeout exceeded when trying to connect'),
      new Error('Connection terminated unexpectedly'),
      Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' }),
      Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }),
      Object.assign(new Error('x'), { code: '08006' }),
      Object.assign(new Error('too many connections'), { code: '53300' }),
    ]) {
      expect(isDatabaseUnavailable(err), String(err)).toBe(true);
    }
    for (const err of [Object.assign(new Error('syntax'), { code: '42601' }), Object.assign(new Error('bigint'), { code: '22003' }), new Error('boom'), null]) {
      expect(isDatabaseUnavailable(err), String(err)).toBe(false);
    }
  });

  let api: ServiceProcess | undefined;
  afterAll(async () => {
    await api?.kill('SIGKILL');
  });

  it('catalog, tools, icons and request status answer 503 with Retry-After, in the envelope', async () => {
    // A port where nothing listens: every connection attempt is refused.
    const server = net.createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as net.AddressInfo).port;
    await new Promise<void>((r) => server.close(() => r()));
    api = await startApiProcess({ ...ownPair('routes-nodb'), databaseUrl: `postgres://nobody:secret@127.0.0.1:${port}/none`, env: { WQS_SKIP_MIGRATIONS: '1' } });
    const base = String(api.started.url);
    const catalog = ['/v1/catalog', '/v1/catalog?query=books', '/v1/catalog/detail?api=@books', '/v1/catalog/suggest?query=bo', '/v1/catalog/sitemap', `/v1/icons/${'a'.repeat(64)}`];
    for (const path of catalog) {
      const res = await call('GET', path, { baseUrl: base });
      expectEnvelope(res, 503, 'catalog_unavailable');
      expect(res.body.error.retryable).toBe(true);
      expect(res.headers.get('retry-after'), path).toBe('5');
      expect(res.text).not.toMatch(/ECONNREFUSED|secret|nobody|stack/);
    }
    // Keyed routes cannot check the key first: 503 api_key_verification_unavailable, also with Retry-After.
    for (const path of ['/v1/catalog/tools', '/v1/query/requests/req_routes_test_0001', '/v1/auth']) {
      const res = await call('GET', path, { baseUrl: base, key: org.api_key });
      expectEnvelope(res, 503, 'api_key_verification_unavailable');
      expect(res.headers.get('retry-after'), path).toBe('5');
    }
    // Routes that need no database still answer.
    expect((await call('GET', '/v1/catalog/categories', { baseUrl: base })).status).toBe(200);
    expect((await call('GET', '/openapi.json', { baseUrl: base })).status).toBe(200);
    const health = await call('GET', '/health', { baseUrl: base });
    expect(health.status).toBe(503);
    expect(health.body.checks.postgres.status).toBe('down');
  }, 180_000);
});
