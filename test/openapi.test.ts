// The OpenAPI document (generated from the zod schemas), the reference page and the RFC 9727
// api-catalog. The document is checked with a standard OpenAPI 3.1 validator.
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SERVICE_VERSION } from '../apps/api/app.ts';
import { ERRORS } from '../shared/errors.ts';
import { CONTRACT_VERSION } from '../shared/openapi/document.ts';
import { BASE, startCatalogFixture, type CatalogFixture } from './catalog-fixture.ts';

let f: CatalogFixture;
beforeAll(async () => {
  f = await startCatalogFixture([], { demo: false });
}, 120_000);
afterAll(async () => f?.close());

const get = (url: string) => f.app.inject({ method: 'GET', url });

describe('GET /openapi.json', () => {
  let doc: any;
  beforeAll(async () => {
    const r = await get('/openapi.json');
    expect(r.statusCode).toBe(200);
    expect(r.headers['content-type']).toContain('application/json');
    doc = r.json();
  });

  it('is a valid OpenAPI 3.1 document', async () => {
    const validator = new Validator();
    const res = await validator.validate(structuredClone(doc));
    expect(res.errors ?? []).toEqual([]);
    expect(res.valid).toBe(true);
    expect(validator.version).toBe('3.1');
    // Every $ref resolves.
    const refs = JSON.stringify(doc).match(/"\$ref":"[^"]+"/g) ?? [];
    for (const ref of new Set(refs)) {
      const pointer = ref.slice(8, -1);
      expect(pointer.startsWith('#/components/'), pointer).toBe(true);
      const target = pointer.slice(2).split('/').reduce((o: any, k) => o?.[k], doc);
      expect(target, pointer).toBeDefined();
    }
  });

  it('carries contract version 1.2.0, the bearer scheme and every endpoint of the spec', () => {
    expect(doc.openapi).toMatch(/^3\.1\./);
    expect(doc.info.version).toBe('1.2.0');
    expect(CONTRACT_VERSION).toBe(SERVICE_VERSION);
    expect(doc.servers[0].url).toBe(BASE);
    expect(doc.components.securitySchemes.bearerAuth).toEqual(expect.objectContaining({ type: 'http', scheme: 'bearer' }));
    const expected: Array<[string, string]> = [
      ['get', '/'],
      ['get', '/health'],
      ['post', '/v1/query'],
      ['get', '/v1/query/requests/{request_id}'],
      ['post', '/v1/query/requests/{request_id}/feedback'],
      ['get', '/v1/auth'],
      ['post', '/v1/files'],
      ['get', '/v1/catalog'],
      ['get', '/v1/catalog/detail'],
      ['get', '/v1/catalog/suggest'],
      ['get', '/v1/catalog/categories'],
      ['get', '/v1/catalog/sitemap'],
      ['get', '/v1/catalog/tools'],
      ['get', '/v1/icons/{sha256}'],
      ['get', '/openapi.json'],
      ['get', '/.well-known/api-catalog'],
      ['post', '/mcp'],
    ];
    for (const [method, path] of expected) expect(doc.paths[path]?.[method], `${method} ${path}`).toBeDefined();
    // Key-free routes opt out of the global bearer requirement; keyed ones keep it.
    expect(doc.paths['/v1/catalog'].get.security).toEqual([]);
    expect(doc.paths['/v1/catalog/tools'].get.security).toEqual([{ bearerAuth: [] }]);
    expect(doc.paths['/v1/query'].post.security).toEqual([{ bearerAuth: [] }]);
  });

  it('documents both query modes and include / exclude / schema / mapping from the zod schema', () => {
    const q = doc.components.schemas.QueryRequest;
    for (const field of ['api', 'operation', 'version', 'input', 'prompt', 'allowed_apis', 'blocked_apis', 'attachments', 'stream', 'response', 'visibility']) {
      expect(q.properties[field], field).toBeDefined();
    }
    expect(q.additionalProperties).toBe(false);
    const response = q.properties.response;
    for (const field of ['format', 'include', 'exclude', 'schema', 'mapping']) expect(response.properties[field], field).toBeDefined();
    expect(response.properties.include.maxItems).toBe(1000);
    expect(response.properties.mapping.items.required).toEqual(['target', 'source']);
    const examples = doc.paths['/v1/query'].post.requestBody.content['application/json'].examples;
    expect(Object.keys(examples)).toEqual(expect.arrayContaining(['direct', 'prompt', 'direct_exclude', 'direct_schema']));
    expect(Object.keys(doc.paths['/v1/query'].post.responses['200'].content)).toEqual(['application/json', 'text/event-stream']);
  });

  it("QueryRequest states the rules the server enforces: unique lists and response's combinations", () => {
    // Validate bodies with the document's own schema (its $refs resolved within the document).
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    ajv.addSchema({ $id: 'doc', components: doc.components });
    const ref = (name: string) => ajv.compile({ $ref: `doc#/components/schemas/${name}` });
    const valid = ref('QueryRequest');
    const direct = { api: '@books', operation: 'search_books', input: { query: 'dune' } };
    expect(valid(direct)).toBe(true);
    expect(valid({ ...direct, response: { include: ['a', 'b'] } })).toBe(true);
    expect(valid({ ...direct, response: { schema: { type: 'object' }, mapping: [{ target: '/a', source: '/b' }] } })).toBe(true);
    // Each of these is 400 invalid_input from the server (test/query-validation.test.ts).
    for (const response of [
      { include: ['a', 'a'] },
      { exclude: ['a', 'a'] },
      { include: ['a'], exclude: ['b'] },
      { include: ['a'], schema: {} },
      { include: ['a'], schema: {}, mapping: [{ target: '/a', source: '/b' }] },
      { exclude: ['a'], schema: {} },
      { mapping: [{ target: '/a', source: '/b' }] },
    ]) {
      expect(valid({ ...direct, response }), JSON.stringify(response)).toBe(false);
    }
    expect(valid({ prompt: 'weather', allowed_apis: ['@a', '@a'] })).toBe(false);
    expect(valid({ prompt: 'weather', blocked_apis: ['@a', '@a'] })).toBe(false);
  });

  it("types POST /v1/query's headers as the spec does: Idempotency-Replayed boolean, the cost a number, the billing status an enum", () => {
    const h = doc.paths['/v1/query'].post.responses['200'].headers;
    expect(h['Idempotency-Replayed'].schema.type).toBe('boolean');
    expect(h['X-Svc-Cost-Credits'].schema.type).toBe('number');
    expect(h['X-Svc-Billing-Status'].schema.enum).toEqual(['settled', 'pending']);
  });

  it('describes the event stream frames of POST /v1/query and the 501 of prompt mode', () => {
    const post = doc.paths['/v1/query'].post;
    expect(post.responses['200'].content['text/event-stream'].schema).toEqual({ $ref: '#/components/schemas/StreamEvent' });
    const frames = doc.components.schemas.StreamEvent.oneOf ?? doc.components.schemas.StreamEvent.anyOf;
    const byEvent = Object.fromEntries(frames.map((f: any) => [f.properties.event.const ?? f.properties.event.enum?.[0], f]));
    expect(Object.keys(byEvent).sort()).toEqual(['error', 'progress', 'result']);
    for (const f of frames) expect(f.required).toEqual(['id', 'event', 'data']);
    // `data` is JSON text; its shape is the embedded contentSchema (OpenAPI 3.2's way for SSE).
    for (const f of frames) expect(f.properties.data).toMatchObject({ type: 'string', contentMediaType: 'application/json' });
    expect(byEvent.progress.properties.data.contentSchema.properties.stage.enum).toEqual(['accepted', 'preparing', 'executing', 'formatting']);
    expect(byEvent.error.properties.data.contentSchema.properties.error.required).toEqual(expect.arrayContaining(['code', 'status']));
    expect(byEvent.result.properties.data.contentSchema.properties.data.properties.receipt).toBeDefined();
    expect(post.responses['501']).toEqual({ $ref: '#/components/responses/E501' });
    expect(doc.components.responses.E501.content['application/json'].examples.feature_unavailable).toBeDefined();
    expect(post.requestBody.content['application/json'].schema).toEqual({ $ref: '#/components/schemas/QueryRequest' });
    expect(post.parameters.find((p: any) => p.in === 'header').name).toBe('Idempotency-Key');
  });

  it('lists 405 with Allow on every operation', () => {
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(item)) expect(op.responses['405'], `${method} ${path}`).toBeDefined();
    }
    expect(doc.components.responses.E405.headers.Allow).toBeDefined();
  });

  it('documents every error response with the envelope and every code', () => {
    const statuses = Object.keys(doc.paths['/v1/query'].post.responses);
    for (const s of ['400', '401', '402', '403', '404', '408', '409', '410', '413', '422', '429', '500', '502', '503', '504']) expect(statuses).toContain(s);
    const documented = new Set(Object.values(doc.components.responses).flatMap((r: any) => Object.keys(r.content['application/json'].examples ?? {})));
    for (const code of Object.keys(ERRORS)) expect(documented.has(code), code).toBe(true);
    expect(doc.components.schemas.Error.properties.error.$ref ?? doc.components.schemas.Error.properties.error).toBeTruthy();
    expect(doc.components.responses.E429.headers['Retry-After']).toBeDefined();
  });

  it('lists 408 request_timeout, with the error envelope, on every operation that takes a body: a body sent too slowly is refused on any of them', () => {
    const withBody = Object.entries(doc.paths).flatMap(([path, item]: [string, any]) =>
      Object.entries(item)
        .filter(([, op]: [string, any]) => op?.requestBody)
        .map(([method, op]: [string, any]) => [`${method.toUpperCase()} ${path}`, op] as const),
    );
    expect(withBody.map(([name]) => name)).toEqual(expect.arrayContaining(['POST /v1/files', 'POST /v1/query', 'POST /v1/query/requests/{request_id}/feedback', 'POST /mcp', 'POST /oauth/token']));
    for (const [name, op] of withBody) expect(op.responses['408'], name).toEqual({ $ref: '#/components/responses/E408' });
    // The upload's body is raw bytes, so a client generated from the document sends them as such.
    expect(doc.paths['/v1/files'].post.requestBody).toMatchObject({ required: true, content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } } });
    const e408 = doc.components.responses.E408.content['application/json'];
    expect(e408.schema).toEqual({ $ref: '#/components/schemas/Error' });
    expect(e408.examples.request_timeout.value.error).toMatchObject({ code: 'request_timeout', status: 408, retryable: true });
  });

  it('names the catalog paging parameter `cursor` and validates with the same schema', async () => {
    const names = doc.paths['/v1/catalog'].get.parameters.map((p: any) => p.name);
    expect(names).toEqual(['query', 'api', 'category', 'sort', 'limit', 'max_cost_credits', 'cursor']);
    const limit = doc.paths['/v1/catalog'].get.parameters.find((p: any) => p.name === 'limit');
    expect(limit.schema).toMatchObject({ type: 'integer', minimum: 1, maximum: 100, default: 60 });
    expect(doc.paths['/v1/catalog/detail'].get.parameters.find((p: any) => p.name === 'api').required).toBe(true);
    expect(doc.paths['/v1/catalog/tools'].get.parameters.map((p: any) => p.name)).toEqual(['api', 'query', 'operation_id', 'cursor']);
  });

  it("names the values an operation's health.status takes (the database's CHECK), none it never takes", () => {
    const described: string = doc.components.schemas.OperationHealth.properties.status.description;
    for (const value of ['unknown', 'healthy', 'degraded', 'failing', 'unverifiable']) expect(described).toContain(`\`${value}\``);
    expect(described).not.toContain('`verified`');
  });
});

describe('reference page and api-catalog', () => {
  it('serves an interactive reference without any CDN', async () => {
    const r = await get('/docs');
    expect(r.statusCode).toBe(200);
    expect(r.headers['content-type']).toContain('text/html');
    const srcs = [...r.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(srcs.every((s) => s.startsWith('/'))).toBe(true);
    for (const s of srcs.filter((x) => x.startsWith('/docs/assets/'))) {
      const a = await get(s);
      expect(a.statusCode, s).toBe(200);
      expect(a.rawPayload.length, s).toBeGreaterThan(100);
    }
    expect((await get('/docs/assets/init.js')).body).toContain('/openapi.json');
    expect((await get('/docs/assets/../../package.json')).statusCode).toBe(404);
  });

  it('serves an RFC 9727 linkset pointing to the document, the reference and /health', async () => {
    const r = await get('/.well-known/api-catalog');
    expect(r.statusCode).toBe(200);
    expect(r.headers['content-type']).toMatch(/^application\/linkset\+json/);
    const body = r.json();
    const links = body.linkset.find((l: any) => l['service-desc']);
    expect(links['service-desc'][0].href).toBe(`${BASE}/openapi.json`);
    expect(links['service-doc'][0].href).toBe(`${BASE}/docs`);
    expect(links.status[0].href).toBe(`${BASE}/health`);
    expect(body.linkset[0].item[0].href).toBe(links.anchor);
    const head = await f.app.inject({ method: 'HEAD', url: '/.well-known/api-catalog' });
    expect(head.statusCode).toBe(200);
  });
});
