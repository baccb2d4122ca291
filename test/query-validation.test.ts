// Every rule of QueryRequest and the input/operation resolution, over real HTTP.
// None of these may dispatch anything or charge anybody.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { balanceOf, call, closeDb, db, ledgerOf, newOrg, query } from './helpers/stack.ts';
import { publishApi } from '../shared/db/catalog.ts';

const weather = { api: '@weather', operation: 'current_weather', input: { city: 'London' } };
let org: Awaited<ReturnType<typeof newOrg>>;

beforeAll(async () => {
  org = await newOrg(50);
});
afterAll(async () => {
  // Nothing in this file reached the ledger.
  expect(await ledgerOf(org.org_id)).toEqual([]);
  expect(await balanceOf(org.org_id)).toEqual({ granted: 50, available: 50, reserved: 0, charged: 0 });
  await closeDb();
});

function expectError(res: { status: number; body: any }, status: number, code: string, param?: string) {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  expect(res.body.success).toBe(false);
  expect(res.body.error.code).toBe(code);
  expect(res.body.error.status).toBe(status);
  expect(typeof res.body.error.retryable).toBe('boolean');
  expect(res.body.error.doc_url).toMatch(new RegExp(`/docs/errors#${code}$`));
  if (param !== undefined) expect(res.body.error.param).toBe(param);
}

describe('QueryRequest shape (invalid_input)', () => {
  const cases: Array<[string, unknown, string, string[]]> = [
    ['unknown top-level field', { ...weather, extra: 1 }, 'extra', ['extra']],
    ['two unknown fields each listed', { ...weather, a: 1, b: 2 }, 'a', ['a', 'b']],
    ['api pattern', { ...weather, api: 'weather' }, 'api', ['api']],
    ['api uppercase', { ...weather, api: '@Weather' }, 'api', ['api']],
    ['operation pattern (numeric id)', { ...weather, operation: '123' }, 'operation', ['operation']],
    ['operation pattern (label)', { ...weather, operation: 'Current weather' }, 'operation', ['operation']],
    ['version zero', { ...weather, version: 0 }, 'version', ['version']],
    ['version too large', { ...weather, version: 2147483648 }, 'version', ['version']],
    ['version not integer', { ...weather, version: 1.5 }, 'version', ['version']],
    ['missing input', { api: '@weather', operation: 'current_weather' }, 'input', ['input']],
    ['missing operation', { api: '@weather', input: {} }, 'operation', ['operation']],
    ['missing everything', {}, 'api', ['api', 'operation', 'input']],
    ['prompt with operation', { prompt: 'weather in London', operation: 'current_weather' }, 'operation', ['operation']],
    ['prompt with input and version', { prompt: 'x', input: {}, version: 1 }, 'input', ['input', 'version']],
    ['empty prompt', { prompt: '' }, 'prompt', ['prompt']],
    ['prompt too long', { prompt: 'x'.repeat(10001) }, 'prompt', ['prompt']],
    ['allowed/blocked overlap', { prompt: 'x', allowed_apis: ['@a'], blocked_apis: ['@a'] }, 'allowed_apis.0', ['allowed_apis.0']],
    ['allowed_apis not unique', { prompt: 'x', allowed_apis: ['@a', '@a'] }, 'allowed_apis', ['allowed_apis']],
    ['allowed_apis empty', { prompt: 'x', allowed_apis: [] }, 'allowed_apis', ['allowed_apis']],
    ['allowed_apis in direct mode', { ...weather, allowed_apis: ['@a'] }, 'allowed_apis', ['allowed_apis']],
    ['five attachments', { prompt: 'x', attachments: Array.from({ length: 5 }, (_, i) => ({ id: `file_${String(i).repeat(32)}` })) }, 'attachments', ['attachments']],
    ['attachment id pattern', { prompt: 'x', attachments: [{ id: 'file_xyz' }] }, 'attachments.0.id', ['attachments.0.id']],
    ['attachment purpose', { prompt: 'x', attachments: [{ id: `file_${'a'.repeat(32)}`, purpose: 'other' }] }, 'attachments.0.purpose', ['attachments.0.purpose']],
    ['stream not boolean', { ...weather, stream: 'yes' }, 'stream', ['stream']],
    ['visibility value', { ...weather, visibility: 'shared' }, 'visibility', ['visibility']],
    ['visibility without api', { prompt: 'x', visibility: 'public' }, 'visibility', ['visibility']],
    ['response unknown key', { ...weather, response: { shape: 1 } }, 'response.shape', ['response.shape']],
    ['response format', { ...weather, response: { format: 'xml' } }, 'response.format', ['response.format']],
    ['include with exclude', { ...weather, response: { include: ['city'], exclude: ['country'] } }, 'response.exclude', ['response.exclude']],
    ['include with schema', { ...weather, response: { include: ['city'], schema: { type: 'object' } } }, 'response.schema', ['response.schema']],
    ['exclude with mapping', { ...weather, response: { exclude: ['city'], schema: {}, mapping: [{ target: '/a', source: '/city' }] } }, 'response.schema', ['response.schema', 'response.mapping']],
    ['mapping without schema', { ...weather, response: { mapping: [{ target: '/a', source: '/city' }] } }, 'response.mapping', ['response.mapping']],
    ['mapping item without source', { ...weather, response: { schema: {}, mapping: [{ target: '/a' }] } }, 'response.mapping.0.source', ['response.mapping.0.source']],
    ['include empty', { ...weather, response: { include: [] } }, 'response.include', ['response.include']],
    ['include duplicate', { ...weather, response: { include: ['city', 'city'] } }, 'response.include', ['response.include']],
    ['include item too long', { ...weather, response: { include: ['x'.repeat(1001)] } }, 'response.include.0', ['response.include.0']],
    ['schema over 8 KB', { ...weather, response: { schema: { description: 'x'.repeat(9000) } } }, 'response.schema', ['response.schema']],
    ['mapping target not a pointer', { ...weather, response: { schema: {}, mapping: [{ target: 'a', source: '/city' }] } }, 'response.mapping.0.target', ['response.mapping.0.target']],
    ['mapping source with a bad escape', { ...weather, response: { schema: {}, mapping: [{ target: '/a', source: '/c~2ity' }] } }, 'response.mapping.0.source', ['response.mapping.0.source']],
    ['mapping target through __proto__', { ...weather, response: { schema: {}, mapping: [{ target: '/__proto__/x', source: '/city' }] } }, 'response.mapping.0.target', ['response.mapping.0.target']],
    ['mapping target undeclared', { ...weather, response: { schema: { properties: { a: {} } }, mapping: [{ target: '/b', source: '/city' }] } }, 'response.mapping.0.target', ['response.mapping.0.target']],
    ['mapping targets duplicate', { ...weather, response: { schema: {}, mapping: [{ target: '/a', source: '/city' }, { target: '/a', source: '/country' }] } }, 'response.mapping.1.target', ['response.mapping.1.target']],
    ['mapping target sparse index', { ...weather, response: { schema: {}, mapping: [{ target: '/x/100000000', source: '/city' }] } }, 'response.mapping.0.target', ['response.mapping.0.target']],
    ['mapping sources overlap', { ...weather, response: { schema: {}, mapping: [{ target: '/a', source: '' }, { target: '/b', source: '/city' }] } }, 'response.mapping.1.source', ['response.mapping.1.source']],
    ['schema with a remote $ref', { ...weather, response: { schema: { $ref: 'https://example.com/s.json' } } }, 'response.schema.$ref', ['response.schema.$ref']],
    ['schema with a constructor property', { ...weather, response: { schema: { properties: { constructor: {} } } } }, 'response.schema.properties.constructor', ['response.schema.properties.constructor']],
    ['include through prototype', { ...weather, response: { include: ['city.prototype'] } }, 'response.include.0', ['response.include.0']],
  ];
  for (const [name, body, param, paths] of cases) {
    it(name, async () => {
      const res = await query(org.api_key, body);
      expectError(res, 400, 'invalid_input', param);
      expect(res.body.error.type).toBe('validation_error');
      const issuePaths = res.body.error.details.issues.map((i: { path: string }) => i.path);
      for (const p of paths) expect(issuePaths).toContain(p);
    });
  }

  it('include paths must be selectable fields of the operation', async () => {
    const res = await query(org.api_key, { ...weather, response: { include: ['city', 'nonexistent.field'] } });
    expectError(res, 400, 'invalid_input', 'response.include.1');
  });

  it('body that is not an object, malformed JSON, wrong media type, oversized', async () => {
    expectError(await call('POST', '/v1/query', { key: org.api_key, body: [1, 2] }), 400, 'invalid_input');
    const bad = await call('POST', '/v1/query', { key: org.api_key, rawBody: '{"api": ', headers: { 'content-type': 'application/json' } });
    expectError(bad, 400, 'invalid_input');
    expect(bad.body.error.details.issues.length).toBeGreaterThan(0);
    expectError(await call('POST', '/v1/query', { key: org.api_key, rawBody: 'api=x', headers: { 'content-type': 'text/plain' } }), 415, 'unsupported_media_type');
    const huge = JSON.stringify({ ...weather, input: { city: 'x'.repeat(3 * 1024 * 1024) } });
    const large = await call('POST', '/v1/query', { key: org.api_key, rawBody: huge, headers: { 'content-type': 'application/json' } });
    expectError(large, 413, 'payload_too_large');
    // The body as a whole: no param; the limit it passed, as POST /v1/files says it.
    expect(large.body.error).not.toHaveProperty('param');
    expect(large.body.error.details).toEqual({ limit_bytes: 2 * 1024 * 1024 });
  });

  it('a body of another type names Content-Type in param and details.issues, on every JSON route', async () => {
    for (const path of ['/v1/query', '/v1/query/requests/req_0123456789abcdef/feedback']) {
      for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) {
        const res = await call('POST', path, { key: org.api_key, rawBody: '{"value":1}', headers: { 'content-type': type } });
        expectError(res, 415, 'unsupported_media_type', 'Content-Type');
        expect(res.body.error.details.issues, `${path} ${type}`).toEqual([{ path: 'Content-Type', message: 'must be application/json' }]);
      }
    }
  });

  it('Idempotency-Key format', async () => {
    expectError(await query(org.api_key, weather, { 'idempotency-key': 'has space' }), 400, 'invalid_input', 'Idempotency-Key');
    expectError(await query(org.api_key, weather, { 'idempotency-key': 'k'.repeat(256) }), 400, 'invalid_input', 'Idempotency-Key');
  });

  it('a prompt no operation serves is refused and runs nothing (prompt mode: test/prompt-*.test.ts)', async () => {
    const res = await query(org.api_key, { prompt: 'Translate this poem into Klingon and sing it to me' });
    expectError(res, 422, 'prompt_unroutable', 'prompt');
  });
});

describe('resolution and input schema', () => {
  it('input that breaks the input schema is invalid_provider_input with each path', async () => {
    const res = await query(org.api_key, { ...weather, input: { town: 'London' } });
    expectError(res, 422, 'invalid_provider_input');
    const paths = res.body.error.details.issues.map((i: { path: string }) => i.path);
    expect(paths).toContain('input.town');
    expect(paths).toContain('input.city');
    expectError(await query(org.api_key, { ...weather, input: 'London' }), 422, 'invalid_provider_input', 'input');
    expectError(await query(org.api_key, { ...weather, input: { city: 42 } }), 422, 'invalid_provider_input', 'input.city');
  });

  it('invalid_provider_input names the offending field: keys unescaped, the property a keyword is about', async () => {
    const owner = await newOrg(5);
    await publishApi(
      db(),
      {
        handle: '@paths',
        name: 'Paths',
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
            versions: [
              {
                version: 1,
                input_schema: {
                  type: 'object',
                  properties: {
                    'a/b': { type: 'string' },
                    'x~y': { type: 'string' },
                    items: { type: 'array', items: { type: 'object', required: ['n'], properties: { n: { type: 'integer' } } } },
                    both: { type: 'object', dependentRequired: { from: ['to'] } },
                    closed: { type: 'object', properties: { p: { type: 'string' } }, unevaluatedProperties: false },
                    named: { type: 'object', propertyNames: { pattern: '^x' } },
                  },
                },
                output_schema: {},
                examples: [],
                recipe: {},
              },
            ],
          },
        ],
      },
      { ownerOrgId: owner.org_id },
    );
    const res = await query(owner.api_key, {
      api: '@paths',
      operation: 'op',
      input: { 'a/b': 1, 'x~y': 2, items: [{ n: 1 }, { n: 'x' }, {}], both: { from: 1 }, closed: { extra: 1 }, named: { yy: 1 } },
    });
    expectError(res, 422, 'invalid_provider_input', 'input.a/b');
    const paths = res.body.error.details.issues.map((i: { path: string }) => i.path);
    expect(paths).toEqual(
      expect.arrayContaining(['input.a/b', 'input.x~y', 'input.items.1.n', 'input.items.2.n', 'input.both.to', 'input.closed.extra', 'input.named.yy']),
    );
    expect(paths.filter((p: string) => /~[01]/.test(p) || ['input.both', 'input.closed', 'input.named'].includes(p))).toEqual([]);
    expect(await ledgerOf(owner.org_id)).toEqual([]);
  });

  it('string limits count characters (code points), not UTF-16 units: an emoji is one character', async () => {
    const e = '\u{1F600}'; // one character, two UTF-16 units
    const issuesOf = (res: { body: any }) => res.body.error.details.issues.map((i: { path: string }) => i.path);
    // 10000 characters is a valid prompt: only the forbidden version is named.
    let res = await query(org.api_key, { prompt: e.repeat(10_000), version: 1 });
    expectError(res, 400, 'invalid_input', 'version');
    expect(issuesOf(res)).toEqual(['version']);
    expectError(await query(org.api_key, { prompt: e.repeat(10_001) }), 400, 'invalid_input', 'prompt');
    // include items and mapping pointers: up to 1000 characters.
    res = await query(org.api_key, { ...weather, response: { include: [e.repeat(1000)] } });
    expectError(res, 400, 'invalid_input', 'response.include.0');
    expect(res.body.error.details.issues[0].message).toMatch(/not a selectable field/);
    expectError(await query(org.api_key, { ...weather, response: { include: [e.repeat(1001)] } }), 400, 'invalid_input', 'response.include.0');
    res = await query(org.api_key, { ...weather, version: 0, response: { schema: {}, mapping: [{ target: `/${e.repeat(999)}`, source: '/city' }] } });
    expectError(res, 400, 'invalid_input', 'version');
    expect(issuesOf(res)).toEqual(['version']);
    res = await query(org.api_key, { ...weather, response: { schema: {}, mapping: [{ target: `/${e.repeat(1000)}`, source: '/city' }] } });
    expectError(res, 400, 'invalid_input', 'response.mapping.0.target');
  });

  it('unknown handle, unknown operation', async () => {
    expectError(await query(org.api_key, { ...weather, api: '@nope' }), 404, 'unknown_api_slug', 'api');
    expectError(await query(org.api_key, { ...weather, operation: 'nope' }), 404, 'unknown_operation', 'operation');
  });

  it('a version that does not exist is workflow_version_unavailable and lists the available ones', async () => {
    const res = await query(org.api_key, { api: '@books', operation: 'get_book', version: 99, input: { isbn13: '9782918455943' } });
    expectError(res, 409, 'workflow_version_unavailable', 'version');
    expect(res.body.error.details.available_versions).toEqual([1, 2]);
  });

  it('a withdrawn version is workflow_version_unavailable', async () => {
    const other = await newOrg(5);
    await publishApi(
      db(),
      {
        handle: '@withdrawn',
        name: 'Withdrawn',
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
            default_version: 2,
            versions: [
              { version: 1, available: false, input_schema: { type: 'object' }, output_schema: {}, examples: [], recipe: {} },
              { version: 2, input_schema: { type: 'object' }, output_schema: {}, examples: [], recipe: {} },
            ],
          },
        ],
      },
      { ownerOrgId: other.org_id },
    );
    const res = await query(other.api_key, { api: '@withdrawn', operation: 'op', version: 1, input: {} });
    expectError(res, 409, 'workflow_version_unavailable', 'version');
    expect(res.body.error.details.available_versions).toEqual([2]);
    // Another organization does not see the private workflow at all.
    expectError(await query(org.api_key, { api: '@withdrawn', operation: 'op', input: {} }), 404, 'unknown_api_slug');
  });

  it('visibility restricts the handle to one side', async () => {
    expectError(await query(org.api_key, { ...weather, visibility: 'private' }), 404, 'unknown_api_slug', 'api');
  });
});

// The spec's `param` is the dotted path of the failing request field: a refusal of the body as a
// whole names none, so it has no `param`, and its one issue is at path ''. The same on every route
// that takes a body (query, feedback, upload, MCP), whichever layer refuses it.
describe('whole-body refusals name no field', () => {
  function expectWholeBody(res: { status: number; body: any; text: string }, status: number, code: string) {
    expectError(res, status, code);
    expect(res.body.error, res.text).not.toHaveProperty('param');
    expect(res.body.error.details.issues.map((i: { path: string }) => i.path), res.text).toEqual(['']);
  }
  const json = (path: string, rawBody: string, headers: Record<string, string> = {}) =>
    call('POST', path, { key: org.api_key, rawBody, headers: { 'content-type': 'application/json', ...headers } });
  const feedback = '/v1/query/requests/req_0000000000wholebody/feedback';
  const deep = '{"a":'.repeat(65) + '1' + '}'.repeat(65);

  it('POST /v1/query: empty, not JSON, nested too deep, not an object', async () => {
    for (const raw of ['', '{"api": ', deep, '[1, 2]', 'null', '"text"']) expectWholeBody(await json('/v1/query', raw), 400, 'invalid_input');
  });

  it('POST /v1/query/requests/{id}/feedback: empty, not JSON, not an object', async () => {
    for (const raw of ['', '{"value":', '[1]', '7']) expectWholeBody(await json(feedback, raw), 400, 'invalid_input');
  });

  it('POST /v1/files: an empty file', async () => {
    const res = await call('POST', '/v1/files', { key: org.api_key, rawBody: '', headers: { 'content-type': 'application/octet-stream', 'x-file-name': 'empty.txt' } });
    expectWholeBody(res, 400, 'invalid_input');
    expect((await db().query('SELECT count(*)::int AS n FROM files WHERE org_id = $1', [org.org_id])).rows[0].n).toBe(0);
  });

  it('POST /mcp: a body that is not JSON, or nested too deep', async () => {
    for (const raw of ['{"jsonrpc":', deep]) expectWholeBody(await json('/mcp', raw, { accept: 'application/json, text/event-stream' }), 400, 'invalid_input');
  });
});

describe('every route answers the envelope', () => {
  it('unknown route and wrong method', async () => {
    expectError(await call('GET', '/v1/nope'), 404, 'route_not_found');
    const wrong = await call('GET', '/v1/query');
    expectError(wrong, 405, 'method_not_allowed');
    expect(wrong.headers.get('allow')).toBe('POST');
  });

  it('the error guide is served with an entry for each code', async () => {
    const guide = await call('GET', '/docs/errors');
    expect(guide.status).toBe(200);
    for (const code of ['invalid_input', 'request_interrupted', 'execution_timeout', 'api_key_required']) expect(guide.text).toContain(`id="${code}"`);
  });
});
